"""Agent tasks: multi-tool plans over a calculator, a key-value store and a small read-only file system.

Tools: calculator(expression), kv_get(key), read_file(path), list_files(dir). The data are hidden (only the
tools reveal them), so a correct answer needs the lookups; the verifier replays the calls and checks them.
Final line 'Answer: <value>'. Score: 0 if wrong or a needed lookup is missing; else 1.0 for at most the
optimal number of tool calls, -0.1 per extra call (floor 0.5). Passing needs a correct answer, all needed
lookups, at most optimal + 2 calls, and no call with wrong argument types.
Difficulty: more items, longer chains, distractor keys and files.

    .venv/bin/python -m domains sample agent.kv_sum --seed 0 --difficulty 1
"""
from __future__ import annotations

import ast
import operator
import random
from typing import Any, Callable, Iterator

from domains import answers
from domains.chat import tools_prompt
from domains.core import Reward, Task, ToolEnv, ToolError, tool
from domains.replay import ReplayDomain

TOOLS = [
    tool("calculator", "Evaluate an arithmetic expression (+ - * / // % ** and parentheses).", {"expression": {"type": "string"}}),
    tool("kv_get", "Get the value stored under a key.", {"key": {"type": "string"}}),
    tool("read_file", "Read a text file.", {"path": {"type": "string"}}),
    tool("list_files", "List the files in a directory.", {"dir": {"type": "string"}}),
]
SYSTEM = ("Use the tools to find the answer. End with one line 'Answer: <value>'. Use as few tool calls as you can.\n"
          "Tools:\n" + tools_prompt(TOOLS))
ITEMS = ["apple", "bolt", "cable", "drill", "eraser", "filter", "glove", "hinge", "ink", "jar", "knob", "lamp", "mop"]
CITIES = ["oslo", "lima", "pune", "kobe", "faro", "graz", "nice", "bari"]
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
       ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def calc(expression: str) -> str:
    """Safe arithmetic: numbers and operators only, bounded sizes."""
    expr = expression
    if len(expr) > 300:
        raise ToolError("expression longer than 300 characters")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse {expr!r}") from None

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.BinOp) and type(n.op) in OPS:
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Pow) and (abs(b) > 64 or abs(a) > 10 ** 6):
                raise ToolError("exponent too large")
            try:
                return OPS[type(n.op)](a, b)
            except ZeroDivisionError:
                raise ToolError("division by zero") from None
        raise ToolError("only numbers, + - * / // % ** and parentheses are allowed")

    v = ev(tree)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    return str(v)


class Workspace:
    def __init__(self, kv: dict[str, str], files: dict[str, str]):
        self.kv, self.files = kv, files
        self.seen: set[str] = set()  # "kv:<key>" / "file:<path>" looked up successfully

    def impls(self) -> dict[str, Callable[..., str]]:
        return {"calculator": calc, "kv_get": self.kv_get, "read_file": self.read_file, "list_files": self.list_files}

    def kv_get(self, key: str) -> str:
        if key not in self.kv:
            raise ToolError(f"no key {key!r}")
        self.seen.add(f"kv:{key}")
        return self.kv[key]

    def read_file(self, path: str) -> str:
        if path not in self.files:
            raise ToolError(f"no file {path!r}")
        self.seen.add(f"file:{path}")
        return self.files[path]

    def list_files(self, dir: str) -> str:  # noqa: A002 - the tool's public argument name
        d = dir.rstrip("/") + "/"
        names = sorted(p[len(d):] for p in self.files if p.startswith(d) and "/" not in p[len(d):])
        if not names:
            raise ToolError(f"no files in {dir!r}")
        self.seen.add(f"dir:{dir.rstrip('/')}")
        return "\n".join(names)


# A variant returns: question, kv, files, plan (list of calls, one per step), answer, kind, needed lookups.
def _kv(k):
    return {"name": "kv_get", "arguments": {"key": k}}


def _rf(p):
    return {"name": "read_file", "arguments": {"path": p}}


def _calc(e):
    return {"name": "calculator", "arguments": {"expression": e}}


def _distract(rng, kv, d, k=(0, 2, 5, 10)):
    for _ in range(k[d]):
        kv.setdefault(f"{rng.choice(['stock', 'price', 'weight'])}_{rng.choice(ITEMS)}", str(rng.randint(1, 999)))


def kv_single(rng, d):
    """Look up one value."""
    item = rng.choice(ITEMS)
    kv = {f"price_{item}": str(rng.randint(1, 999))}
    _distract(rng, kv, d)
    return f"What is the price of {item}? (key price_{item})", kv, {}, [_kv(f"price_{item}")], kv[f"price_{item}"], "int"


def kv_sum(rng, d):
    """Sum of several stored values (calculator)."""
    its = rng.sample(ITEMS, (2, 3, 4, 6)[d])
    kv = {f"stock_{i}": str(rng.randint(1, 500)) for i in its}
    _distract(rng, kv, d)
    keys = [f"stock_{i}" for i in its]
    return (f"What is the total stock of {', '.join(its)}? (keys stock_<item>)", kv, {},
            [_kv(k) for k in keys] + [_calc(" + ".join(kv[k] for k in keys))], str(sum(int(kv[k]) for k in keys)), "int")


def kv_product(rng, d):
    """Price times quantity."""
    item = rng.choice(ITEMS)
    kv = {f"price_{item}": str(rng.randint(2, 99 * (d + 1))), f"qty_{item}": str(rng.randint(2, 40 * (d + 1)))}
    _distract(rng, kv, d)
    a, b = kv[f"price_{item}"], kv[f"qty_{item}"]
    return (f"What is the order value of {item} (price_{item} times qty_{item})?", kv, {},
            [_kv(f"price_{item}"), _kv(f"qty_{item}"), _calc(f"{a} * {b}")], str(int(a) * int(b)), "int")


def kv_diff(rng, d):
    """Difference of two stored values."""
    a, b = rng.sample(ITEMS, 2)
    kv = {f"stock_{a}": str(rng.randint(1, 900)), f"stock_{b}": str(rng.randint(1, 900))}
    _distract(rng, kv, d)
    x, y = kv[f"stock_{a}"], kv[f"stock_{b}"]
    return (f"How much larger is stock_{a} than stock_{b} (may be negative)?", kv, {},
            [_kv(f"stock_{a}"), _kv(f"stock_{b}"), _calc(f"{x} - {y}")], str(int(x) - int(y)), "int")


def kv_chain(rng, d):
    """Follow pointers: each value names the next key."""
    depth = (1, 2, 3, 5)[d]
    keys = [f"node_{rng.randint(100, 999)}_{i}" for i in range(depth + 1)]
    kv = {keys[i]: f"go to {keys[i + 1]}" for i in range(depth)}
    kv[keys[-1]] = str(rng.randint(1, 9999))
    _distract(rng, kv, d)
    return (f"Start at key {keys[0]} and follow the 'go to' links until you reach a number. What is it?", kv, {},
            [_kv(k) for k in keys], kv[keys[-1]], "int")


def _extreme(which):
    def make(rng, d):
        its = rng.sample(ITEMS, (2, 3, 4, 6)[d])
        vals = rng.sample(range(1, 999), len(its))
        kv = {f"weight_{i}": str(v) for i, v in zip(its, vals)}
        best = (max if which == "max" else min)(its, key=lambda i: int(kv[f"weight_{i}"]))
        word = "heaviest" if which == "max" else "lightest"
        return (f"Which of {', '.join(its)} is the {word}? (keys weight_<item>) Answer with the item name.", kv, {},
                [_kv(f"weight_{i}") for i in its], best, "word")
    make.__doc__ = f"Item with the {which} stored weight."
    return make


def average(rng, d):
    """Mean of stored values (integer by construction)."""
    its = rng.sample(ITEMS, (2, 3, 4, 5)[d])
    vals = [rng.randint(1, 300) for _ in its[:-1]]
    vals.append(len(its) * (sum(vals) // len(its) + 1) - sum(vals))
    kv = {f"score_{i}": str(v) for i, v in zip(its, vals)}
    return (f"What is the average of score_<item> for {', '.join(its)}?", kv, {},
            [_kv(f"score_{i}") for i in its] + [_calc(f"({' + '.join(map(str, vals))}) / {len(its)}")],
            str(sum(vals) // len(its)), "int")


def calc_only(rng, d):
    """Exact arithmetic on large numbers with the calculator."""
    a, b, c = rng.randint(10 ** (d + 2), 10 ** (d + 3)), rng.randint(10 ** (d + 1), 10 ** (d + 2)), rng.randint(2, 99)
    e = f"{a} * {b} - {c}" if d < 2 else f"({a} + {c}) * {b} - {a} // {c}"
    return f"Compute {e}.", {}, {}, [_calc(e)], calc(e), "int"


def file_value(rng, d):
    """Read a setting from a config file."""
    keys = rng.sample(["timeout", "retries", "port", "workers", "batch", "depth", "limit"], (1, 3, 5, 7)[d])
    vals = {k: rng.randint(1, 9000) for k in keys}
    target = rng.choice(keys)
    files = {"/etc/app.conf": "\n".join(f"{k}={v}" for k, v in vals.items())}
    return f"What is {target} in /etc/app.conf?", {}, files, [_rf("/etc/app.conf")], str(vals[target]), "int"


def file_sum(rng, d):
    """Sum the numbers listed in a file."""
    xs = [rng.randint(1, 10 ** (d + 2)) for _ in range((2, 4, 6, 10)[d])]
    files = {"/data/amounts.txt": "\n".join(map(str, xs))}
    return ("What is the sum of the numbers in /data/amounts.txt?", {}, files,
            [_rf("/data/amounts.txt"), _calc(" + ".join(map(str, xs)))], str(sum(xs)), "int")


def file_count(rng, d):
    """Count the lines of a log that mention a level."""
    n = (4, 8, 15, 30)[d]
    lines = [f"{rng.choice(['INFO', 'WARN', 'ERROR'])} {rng.choice(ITEMS)} event {i}" for i in range(n)]
    level = rng.choice(["WARN", "ERROR"])
    files = {"/var/log/app.log": "\n".join(lines)}
    return (f"How many lines of /var/log/app.log start with {level}?", {}, files, [_rf("/var/log/app.log")],
            str(sum(ln.startswith(level) for ln in lines)), "int")


def file_then_kv(rng, d):
    """A file names the key to look up."""
    item = rng.choice(ITEMS)
    kv = {f"price_{item}": str(rng.randint(1, 999))}
    _distract(rng, kv, d)
    files = {"/orders/today.txt": f"item: {item}\nkey: price_{item}"}
    return ("Read /orders/today.txt and report the price stored under the key it names.", kv, files,
            [_rf("/orders/today.txt"), _kv(f"price_{item}")], kv[f"price_{item}"], "int")


def kv_then_file(rng, d):
    """A stored value is a path; the file holds the number."""
    city = rng.choice(CITIES)
    path = f"/reports/{city}.txt"
    pop = rng.randint(1000, 999999)
    files = {path: f"city={city}\npopulation={pop}"}
    for c in rng.sample(CITIES, (0, 1, 3, 5)[d]):
        files.setdefault(f"/reports/{c}.txt", f"city={c}\npopulation={rng.randint(1000, 999999)}")
    kv = {"report_path": path}
    return ("The key report_path holds a file path. What population does that file report?", kv, files,
            [_kv("report_path"), _rf(path)], str(pop), "int")


def find_file(rng, d):
    """List a directory, find the file, read the number."""
    city = rng.choice(CITIES)
    files = {f"/inbox/{c}_note.txt": f"tickets={rng.randint(1, 500)}" for c in rng.sample(CITIES, (2, 3, 5, 7)[d])}
    files[f"/inbox/{city}_note.txt"] = f"tickets={rng.randint(1, 500)}"
    ans = files[f"/inbox/{city}_note.txt"].split("=")[1]
    return (f"One of the files in /inbox is about {city}. How many tickets does it report?", {}, files,
            [{"name": "list_files", "arguments": {"dir": "/inbox"}}, _rf(f"/inbox/{city}_note.txt")], ans, "int")


def count_files(rng, d):
    """How many files are in a directory."""
    k = rng.randint(1, (3, 6, 10, 16)[d])
    files = {f"/photos/img_{i:03d}.jpg": "binary" for i in rng.sample(range(1000), k)}
    files["/docs/readme.txt"] = "hello"
    return ("How many files are in /photos?", {}, files, [{"name": "list_files", "arguments": {"dir": "/photos"}}],
            str(k), "int")


def budget_left(rng, d):
    """Budget from the store minus expenses listed in a file."""
    xs = [rng.randint(1, 200 * (d + 1)) for _ in range((2, 3, 5, 8)[d])]
    budget = sum(xs) + rng.randint(0, 999)
    kv = {"budget": str(budget)}
    files = {"/finance/expenses.txt": "\n".join(f"{rng.choice(ITEMS)}: {x}" for x in xs)}
    return ("How much of the budget (key budget) is left after the expenses in /finance/expenses.txt?", kv, files,
            [_kv("budget"), _rf("/finance/expenses.txt"), _calc(f"{budget} - ({' + '.join(map(str, xs))})")],
            str(budget - sum(xs)), "int")


def convert(rng, d):
    """Amount from a file times a rate from the store."""
    amt, rate = rng.randint(1, 500 * (d + 1)), rng.randint(2, 150)
    kv = {"rate_usd_jpy": str(rate), "rate_usd_eur": str(rng.randint(1, 3))}
    files = {"/invoices/inv1.txt": f"amount_usd={amt}"}
    return ("Convert the amount in /invoices/inv1.txt to JPY using key rate_usd_jpy (amount times rate).", kv, files,
            [_rf("/invoices/inv1.txt"), _kv("rate_usd_jpy"), _calc(f"{amt} * {rate}")], str(amt * rate), "int")


def restock(rng, d):
    """Count items whose stock is below a threshold stored in a file."""
    its = rng.sample(ITEMS, (2, 3, 5, 7)[d])
    th = rng.randint(20, 80)
    kv = {f"stock_{i}": str(rng.randint(0, 120)) for i in its}
    files = {"/policy/restock.txt": f"threshold={th}"}
    return (f"How many of {', '.join(its)} have stock (keys stock_<item>) below the threshold in /policy/restock.txt?",
            kv, files, [_rf("/policy/restock.txt")] + [_kv(f"stock_{i}") for i in its],
            str(sum(int(kv[f"stock_{i}"]) < th for i in its)), "int")


def unit_price(rng, d):
    """Total cost divided by quantity, both in a file."""
    q, p = rng.randint(2, 50), rng.randint(1, 400 * (d + 1))
    files = {"/purchases/p7.txt": f"quantity={q}\ntotal={p * q}"}
    return ("What is the unit price (total / quantity) in /purchases/p7.txt?", {}, files,
            [_rf("/purchases/p7.txt"), _calc(f"{p * q} / {q}")], str(p), "int")


def multi_hop(rng, d):
    """Store -> file -> store: a three-hop lookup."""
    item, city = rng.choice(ITEMS), rng.choice(CITIES)
    kv = {"warehouse": city, f"stock_{item}_{city}": str(rng.randint(1, 999))}
    for c in CITIES:
        kv.setdefault(f"stock_{item}_{c}", str(rng.randint(1, 999)))
    files = {f"/warehouses/{city}.txt": f"key=stock_{item}_{city}"}
    return ("The key warehouse names a city; /warehouses/<city>.txt names a stock key. What is that stock value?",
            kv, files, [_kv("warehouse"), _rf(f"/warehouses/{city}.txt"), _kv(f"stock_{item}_{city}")],
            kv[f"stock_{item}_{city}"], "int")


def percent_of(rng, d):
    """A percentage (file) of a stored amount."""
    base, pct = 20 * rng.randint(1, 50 * (d + 1)), rng.choice([5, 10, 15, 25, 50])
    kv = {"revenue": str(base)}
    files = {"/policy/tax.txt": f"tax_percent={pct}"}
    return ("What is the tax on revenue (key revenue) at the rate in /policy/tax.txt?", kv, files,
            [_kv("revenue"), _rf("/policy/tax.txt"), _calc(f"{base} * {pct} / 100")], str(base * pct // 100), "int")


VARIANTS = {f.__name__: f for f in [kv_single, kv_sum, kv_product, kv_diff, kv_chain, average, calc_only, file_value,
                                    file_sum, file_count, file_then_kv, kv_then_file, find_file, count_files,
                                    budget_left, convert, restock, unit_price, multi_hop, percent_of]}
VARIANTS["kv_max"], VARIANTS["kv_min"] = _extreme("max"), _extreme("min")


def _needed(plan: list[dict]) -> list[str]:
    out = []
    for c in plan:
        a = c["arguments"]
        if c["name"] == "kv_get":
            out.append(f"kv:{a['key']}")
        elif c["name"] == "read_file":
            out.append(f"file:{a['path']}")
        elif c["name"] == "list_files":
            out.append(f"dir:{a['dir']}")
    return out


class AgentDomain(ReplayDomain):
    family = "agent"

    def __init__(self, variant: str):
        self.variant, self.make = variant, VARIANTS[variant]
        self.name, self.description = f"agent.{variant}", (self.make.__doc__ or "").strip()

    def build(self, rng: random.Random, difficulty: int) -> dict:
        q, kv, files, plan, ans, kind = self.make(rng, difficulty)
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
                "tools": TOOLS, "max_turns": 2 * len(plan) + 3, "files": files,
                "answer": {"value": ans, "kind": kind, "needed": _needed(plan), "optimal_calls": len(plan)},
                "meta": {"kv": kv, "plan": plan}}

    def new_state(self, task: Task) -> Workspace:
        return Workspace(dict(task.meta["kv"]), dict(task.files))

    def oracle(self, task: Task) -> Iterator[dict]:
        for c in task.meta["plan"]:
            yield {"role": "assistant", "content": "", "tool_calls": [c]}
        yield {"role": "assistant", "content": f"Answer: {task.answer['value']}"}

    def progress(self, task: Task, state: Workspace) -> float:
        need = task.answer["needed"]
        return sum(n in state.seen for n in need) / len(need) if need else 1.0

    def judge(self, task: Task, env: ToolEnv, state: Workspace, final: str) -> Reward:
        a = task.answer
        ok, why = answers.match(a["kind"], answers.answer_line(final), a["value"])
        missing = [n for n in a["needed"] if n not in state.seen]
        calls, opt = len(env.log), a["optimal_calls"]
        details = {"reason": why, "missing_lookups": missing, "calls": calls, "optimal_calls": opt}
        if not ok or missing:
            return Reward(0.0, False, details)
        score = max(0.5, 1.0 - 0.1 * max(0, calls - opt))
        return Reward(score, calls <= opt + 2, details)

    def format_ok(self, task: Task, text: str) -> bool:
        return answers.answer_line(text) is not None


def domains() -> list[AgentDomain]:
    return [AgentDomain(v) for v in sorted(VARIANTS)]
