"""Terminal coding (in the manner of Terminal-Bench): set-up files, an instruction, hidden tests decide the reward.

Tool: bash(command) in a persistent sandbox shell. The final message must be exactly "Done.".
Verification: (1) replay the trajectory's commands in a fresh sandbox session, (2) snapshot the work dir,
(3) in a second, fresh sandbox unpack the snapshot and run the hidden test (stdlib python) which reads a
per-run nonce from stdin and prints it with its verdict. The agent never sees the hidden test, and nothing it
writes in the sandbox is trusted: fake test files, reward files or printed "passed" lines change nothing;
scripts the agent writes are run on hidden inputs, so printing the expected output without computing it fails.
Difficulty: 0 = tiny files and a one-line command; 1 = larger data; 2-3 = more steps and distractors, and the
oracle's demonstrations sometimes mistype a file name first, read the error, diagnose it and fix it.

    .venv/bin/python -m domains sample terminal.count_lines --seed 0 --difficulty 0
"""
from __future__ import annotations

import base64
import json
import random
import re
import secrets
from typing import Any, Callable, Iterator

from domains import sandboxing
from domains.chat import tools_prompt
from domains.core import Domain, Reward, Task, ToolInfraError, tool, tool_calls

BASH = tool("bash", "Run a shell command in the task directory; returns output and exit code.",
            {"command": {"type": "string", "maxLength": 10000}})
SYSTEM = ("You work in a Linux shell. Complete the task with the bash tool, then reply exactly: Done.\nTools:\n"
          + tools_prompt([BASH]))
WORDS = ["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "oscar", "papa", "tango"]
CMD_TIMEOUT_S = 10.0
EXIT_RE = re.compile(r"\[exit code: (-?\d+)")

SNAPSHOT = ("/usr/bin/python3 -I -c \"import base64,io,sys,tarfile;b=io.BytesIO();t=tarfile.open(fileobj=b,mode='w:gz');"
            "t.add('.',arcname='.');t.close();sys.stdout.write('SNAP:'+base64.b64encode(b.getvalue()).decode())\"")

RUNNER_HEAD = r'''
import json, os, subprocess, sys, tarfile
_spec = json.loads(sys.stdin.read())
with tarfile.open("ws.tar.gz") as _t:
    _t.extractall("ws")
os.remove("ws.tar.gz")
os.chdir("ws")
def read(p):
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()
def lines(p):
    return read(p).splitlines()
def run(args, input=None, timeout=10):
    return subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)
def write(p, text):
    with open(p, "w") as f:
        f.write(text)
'''
RUNNER_TAIL = r'''
try:
    check(_spec["seed"])
    _r = {"passed": True}
except Exception as e:
    _r = {"passed": False, "message": (type(e).__name__ + ": " + str(e))[:300]}
print(_spec["nonce"] + " " + json.dumps(_r))
'''


def _nums(rng, n, lo=1, hi=999):
    return [rng.randint(lo, hi) for _ in range(n)]


def _size(d, sizes=(3, 12, 40, 120)):
    return sizes[d]


# Each variant: (rng, d) -> {"instr", "files", "test" (defines check(seed)), "solution": [commands]}.
def create_file(rng, d):
    """Create a file with given content."""
    name, word = f"{rng.choice(WORDS)}.txt", rng.choice(WORDS)
    if d == 0:
        return {"instr": f"Create a file {name} containing the single line: {word}", "files": {},
                "test": f"def check(seed):\n    assert read({name!r}) == {word + chr(10)!r}, 'wrong content'",
                "solution": [f"echo {word} > {name}"]}
    ws = rng.sample(WORDS, d + 1)
    body = "\n".join(ws) + "\n"
    return {"instr": f"Create a file {name} with these lines in order: {', '.join(ws)}", "files": {},
            "test": f"def check(seed):\n    assert read({name!r}) == {body!r}, 'wrong content'",
            "solution": ["printf '%s\\n' " + " ".join(ws) + f" > {name}"]}


def make_dirs(rng, d):
    """Create a nested directory tree."""
    paths = ["/".join(rng.sample(WORDS, rng.randint(1, d + 1))) for _ in range(d + 1)]
    return {"instr": f"Create these directories: {', '.join(paths)}", "files": {},
            "test": f"def check(seed):\n    for p in {paths!r}:\n        assert os.path.isdir(p), p + ' missing'",
            "solution": [f"mkdir -p {' '.join(paths)}"]}


def count_lines(rng, d):
    """Count the lines of a file."""
    n = rng.randint(1, _size(d))
    files = {"data.txt": "".join(f"{rng.choice(WORDS)} {x}\n" for x in _nums(rng, n))}
    return {"instr": "Write the number of lines in data.txt to count.txt (just the number).", "files": files,
            "test": f"def check(seed):\n    assert read('count.txt').strip() == '{n}', 'wrong count'",
            "solution": ["wc -l < data.txt > count.txt"]}


def count_matches(rng, d):
    """Count log lines with a level."""
    n = _size(d) + 2
    levels = [rng.choice(["INFO", "WARN", "ERROR"]) for _ in range(n)]
    levels[0] = "ERROR"
    files = {"app.log": "".join(f"{lv} request {i} {rng.choice(WORDS)}\n" for i, lv in enumerate(levels))}
    k = levels.count("ERROR")
    return {"instr": "Write the number of lines in app.log that contain ERROR to errors.txt.", "files": files,
            "test": f"def check(seed):\n    assert read('errors.txt').strip() == '{k}', 'wrong count'",
            "solution": ["grep -c ERROR app.log > errors.txt"]}


def sort_numbers(rng, d):
    """Sort numbers numerically."""
    xs = _nums(rng, _size(d) + 2, 1, 10 ** (d + 2))
    files = {"numbers.txt": "".join(f"{x}\n" for x in xs)}
    want = "".join(f"{x}\n" for x in sorted(xs))
    return {"instr": "Write the numbers in numbers.txt sorted in increasing numeric order to sorted.txt, one per line.",
            "files": files, "test": f"def check(seed):\n    assert read('sorted.txt') == {want!r}, 'not sorted numerically'",
            "solution": ["sort -n numbers.txt > sorted.txt"]}


def unique_sorted(rng, d):
    """Unique sorted words."""
    ws = [rng.choice(WORDS[: 3 + d * 3]) for _ in range(_size(d) + 2)]
    files = {"words.txt": "\n".join(ws) + "\n"}
    want = "".join(w + "\n" for w in sorted(set(ws)))
    return {"instr": "Write the distinct words of words.txt, sorted alphabetically, one per line, to uniq.txt.",
            "files": files, "test": f"def check(seed):\n    assert read('uniq.txt') == {want!r}, 'wrong'",
            "solution": ["sort -u words.txt > uniq.txt"]}


def head_n(rng, d):
    """First N lines."""
    n, k = _size(d) + 3, rng.randint(1, 3)
    body = [f"line {i} {rng.choice(WORDS)}" for i in range(n)]
    want = "".join(x + "\n" for x in body[:k])
    return {"instr": f"Write the first {k} lines of log.txt to top.txt.", "files": {"log.txt": "\n".join(body) + "\n"},
            "test": f"def check(seed):\n    assert read('top.txt') == {want!r}, 'wrong'", "solution": [f"head -n {k} log.txt > top.txt"]}


def tail_n(rng, d):
    """Last N lines."""
    n, k = _size(d) + 3, rng.randint(1, 3)
    body = [f"entry {i} {rng.choice(WORDS)}" for i in range(n)]
    want = "".join(x + "\n" for x in body[-k:])
    return {"instr": f"Write the last {k} lines of log.txt to last.txt.", "files": {"log.txt": "\n".join(body) + "\n"},
            "test": f"def check(seed):\n    assert read('last.txt') == {want!r}, 'wrong'", "solution": [f"tail -n {k} log.txt > last.txt"]}


def reverse_lines(rng, d):
    """Lines in reverse order."""
    body = [f"{rng.choice(WORDS)} {i}" for i in range(_size(d) + 1)]
    want = "".join(x + "\n" for x in reversed(body))
    return {"instr": "Write the lines of in.txt in reverse order to rev.txt.", "files": {"in.txt": "\n".join(body) + "\n"},
            "test": f"def check(seed):\n    assert read('rev.txt') == {want!r}, 'wrong'", "solution": ["tac in.txt > rev.txt"]}


def replace_word(rng, d):
    """Replace a word everywhere in a file, in place."""
    a, b = rng.sample(WORDS, 2)
    body = " ".join(rng.choice([a, a, *WORDS]) for _ in range(_size(d) * 3)) + "\n"
    body = a + " " + body
    want = re.sub(rf"\b{a}\b", b, body)
    return {"instr": f"In notes.txt replace every occurrence of the word {a} with {b} (edit the file in place).",
            "files": {"notes.txt": body}, "test": f"def check(seed):\n    assert read('notes.txt') == {want!r}, 'wrong'",
            "solution": [f"sed -i 's/\\b{a}\\b/{b}/g' notes.txt"]}


def rename_ext(rng, d):
    """Rename .txt files to .md."""
    names = rng.sample(WORDS, d + 2)
    files = {f"docs/{n}.txt": f"{n}\n" for n in names}
    files["docs/keep.csv"] = "a,b\n"
    return {"instr": "Rename every .txt file in docs/ to have the extension .md instead (keep other files).",
            "files": files, "test": "def check(seed):\n" + f"    for n in {names!r}:\n        assert read('docs/' + n + '.md') == n + '\\n', n\n"
            "        assert not os.path.exists('docs/' + n + '.txt'), n\n    assert os.path.exists('docs/keep.csv')",
            "solution": ['for f in docs/*.txt; do mv "$f" "${f%.txt}.md"; done']}


def move_logs(rng, d):
    """Move .log files into a new directory."""
    names = rng.sample(WORDS, d + 2)
    files = {f"{n}.log": f"{n}\n" for n in names}
    files["readme.md"] = "hi\n"
    return {"instr": "Move every .log file in the current directory into a new directory logs/.", "files": files,
            "test": "def check(seed):\n" + f"    for n in {names!r}:\n        assert read('logs/' + n + '.log') == n + '\\n', n\n"
            "        assert not os.path.exists(n + '.log'), n\n    assert os.path.exists('readme.md')",
            "solution": ["mkdir -p logs", "mv *.log logs/"]}


def delete_tmp(rng, d):
    """Delete .tmp files recursively, keep the rest."""
    files = {}
    for i in range(d + 2):
        sub = "/".join(rng.sample(WORDS, rng.randint(0, 2)))
        base = f"{sub}/" if sub else ""
        files[f"{base}f{i}.tmp"] = "x\n"
        files[f"{base}f{i}.dat"] = "keep\n"
    keep = sorted(k for k in files if k.endswith(".dat"))
    gone = sorted(k for k in files if k.endswith(".tmp"))
    return {"instr": "Delete every file ending in .tmp anywhere under the current directory; keep all other files.",
            "files": files, "test": f"def check(seed):\n    for p in {gone!r}:\n        assert not os.path.exists(p), p\n"
            f"    for p in {keep!r}:\n        assert read(p) == 'keep\\n', p",
            "solution": ["find . -name '*.tmp' -delete"]}


def csv_sum(rng, d):
    """Sum a CSV column."""
    rows = [(rng.choice(WORDS), rng.randint(1, 9), rng.randint(1, 10 ** (d + 2))) for _ in range(_size(d))]
    files = {"sales.csv": "item,qty,amount\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)}
    return {"instr": "Write the sum of the amount column of sales.csv to total.txt (just the number).", "files": files,
            "test": f"def check(seed):\n    assert read('total.txt').strip() == '{sum(r[2] for r in rows)}', 'wrong total'",
            "solution": ["awk -F, 'NR>1{s+=$3} END{print s}' sales.csv > total.txt"]}


def csv_column(rng, d):
    """Extract one CSV column without the header."""
    rows = [(i, rng.choice(WORDS), rng.randint(18, 90)) for i in range(_size(d))]
    files = {"people.csv": "id,name,age\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)}
    want = "".join(f"{b}\n" for _, b, _ in rows)
    return {"instr": "Write the name column of people.csv (without the header) to names.txt, one per line.",
            "files": files, "test": f"def check(seed):\n    assert read('names.txt') == {want!r}, 'wrong'",
            "solution": ["tail -n +2 people.csv | cut -d, -f2 > names.txt"]}


def csv_filter(rng, d):
    """Keep CSV rows above a threshold (with header)."""
    t = rng.randint(30, 70)
    rows = [(rng.choice(WORDS), rng.randint(0, 100)) for _ in range(_size(d) + 2)]
    rows[0] = (rows[0][0], t + 1)
    head = "name,score\n"
    want = head + "".join(f"{a},{b}\n" for a, b in rows if b > t)
    return {"instr": f"Write the rows of scores.csv whose score is greater than {t} to high.csv, keeping the header.",
            "files": {"scores.csv": head + "".join(f"{a},{b}\n" for a, b in rows)},
            "test": f"def check(seed):\n    assert read('high.csv') == {want!r}, 'wrong'",
            "solution": [f"awk -F, 'NR==1 || $2>{t}' scores.csv > high.csv"]}


def json_value(rng, d):
    """Read one value from a JSON config."""
    cfg = {k: rng.randint(1, 65535) for k in rng.sample(["port", "workers", "timeout", "retries", "cache"], 2 + d)}
    key = rng.choice(sorted(cfg))
    return {"instr": f"Write the value of the key {key} in config.json to value.txt.",
            "files": {"config.json": json.dumps(cfg, indent=2) + "\n"},
            "test": f"def check(seed):\n    assert read('value.txt').strip() == '{cfg[key]}', 'wrong'",
            "solution": [f"python3 -c \"import json;print(json.load(open('config.json'))['{key}'])\" > value.txt"]}


def chmod_exec(rng, d):
    """Make a script executable."""
    name = f"{rng.choice(WORDS)}.sh"
    body = f"#!/bin/bash\necho {rng.choice(WORDS)}\n"
    return {"instr": f"Make {name} executable.", "files": {name: body},
            "test": f"def check(seed):\n    assert os.access({name!r}, os.X_OK), 'not executable'\n    assert read({name!r}) == {body!r}",
            "solution": [f"chmod +x {name}"]}


def symlink(rng, d):
    """Create a symbolic link."""
    v = rng.randint(2, 9)
    files = {f"releases/v{i}/VERSION": f"{i}\n" for i in range(1, v + 1)}
    return {"instr": f"Create a symbolic link named latest pointing to releases/v{v}.", "files": files,
            "test": f"def check(seed):\n    assert os.path.islink('latest'), 'not a link'\n    assert read('latest/VERSION') == '{v}\\n'",
            "solution": [f"ln -s releases/v{v} latest"]}


def concat(rng, d):
    """Concatenate parts in order."""
    k = d + 2
    files = {f"part{i}.txt": f"{rng.choice(WORDS)} {i}\n" for i in range(1, k + 1)}
    want = "".join(files[f"part{i}.txt"] for i in range(1, k + 1))
    return {"instr": f"Concatenate part1.txt to part{k}.txt in numeric order into full.txt.", "files": files,
            "test": f"def check(seed):\n    assert read('full.txt') == {want!r}, 'wrong'",
            "solution": ["cat " + " ".join(f"part{i}.txt" for i in range(1, k + 1)) + " > full.txt"]}


def dedupe(rng, d):
    """Remove duplicate lines keeping the first occurrences."""
    body = [rng.choice(WORDS[: 3 + d]) for _ in range(_size(d) + 2)]
    seen, want = set(), ""
    for w in body:
        if w not in seen:
            seen.add(w)
            want += w + "\n"
    return {"instr": "Write in.txt without duplicate lines (keep the first occurrence, same order) to out.txt.",
            "files": {"in.txt": "\n".join(body) + "\n"}, "test": f"def check(seed):\n    assert read('out.txt') == {want!r}, 'wrong'",
            "solution": ["awk '!seen[$0]++' in.txt > out.txt"]}


def largest_file(rng, d):
    """Name of the largest file."""
    names = rng.sample(WORDS, d + 2)
    sizes = rng.sample(range(10, 400), len(names))
    files = {f"data/{n}.bin": "x" * s for n, s in zip(names, sizes)}
    best = names[sizes.index(max(sizes))] + ".bin"
    return {"instr": "Write the name (without directory) of the largest file in data/ to largest.txt.", "files": files,
            "test": f"def check(seed):\n    assert read('largest.txt').strip() == {best!r}, 'wrong'",
            "solution": ["ls -S data | head -n 1 > largest.txt"]}


def line_numbers(rng, d):
    """Number the lines."""
    body = [f"{rng.choice(WORDS)}" for _ in range(_size(d))]
    want = "".join(f"{i}: {w}\n" for i, w in enumerate(body, 1))
    return {"instr": "Write in.txt to numbered.txt with each line prefixed by its number and ': ' (like '1: text').",
            "files": {"in.txt": "\n".join(body) + "\n"}, "test": f"def check(seed):\n    assert read('numbered.txt') == {want!r}, 'wrong'",
            "solution": ["awk '{print NR\": \"$0}' in.txt > numbered.txt"]}


def env_file(rng, d):
    """Write a .env file."""
    kv = {k.upper(): str(rng.randint(1, 9999)) for k in rng.sample(WORDS, d + 1)}
    want = "".join(f"{k}={v}\n" for k, v in kv.items())
    return {"instr": "Create a file .env with these lines in this order: " + ", ".join(f"{k}={v}" for k, v in kv.items()),
            "files": {}, "test": f"def check(seed):\n    assert read('.env') == {want!r}, 'wrong'",
            "solution": ["printf '%s\\n' " + " ".join(f"{k}={v}" for k, v in kv.items()) + " > .env"]}


def archive(rng, d):
    """Create a gzip tar archive of a directory."""
    names = rng.sample(WORDS, d + 1)
    files = {f"project/{n}.py": f"print('{n}')\n" for n in names}
    return {"instr": "Create a gzip-compressed tar archive backup.tar.gz containing the directory project/.",
            "files": files, "test": "def check(seed):\n    with tarfile.open('backup.tar.gz', 'r:gz') as t:\n"
            "        got = {os.path.normpath(m.name) for m in t.getmembers() if m.isfile()}\n"
            f"    assert got == {sorted('project/' + n + '.py' for n in names)!r} or got == set({sorted('project/' + n + '.py' for n in names)!r}), got",
            "solution": ["python3 -m tarfile -c backup.tar.gz project"]}


def find_word_file(rng, d):
    """Which file contains a word."""
    target = rng.choice(WORDS)
    names = rng.sample(["a", "b", "c", "d", "e", "f", "g"], d + 2)
    files = {f"notes/{n}.txt": " ".join(rng.choice([w for w in WORDS if w != target]) for _ in range(5)) + "\n" for n in names}
    hit = rng.choice(names)
    files[f"notes/{hit}.txt"] = files[f"notes/{hit}.txt"].replace("\n", f" {target}\n")
    return {"instr": f"Exactly one file in notes/ contains the word {target}. Write its file name (like x.txt) to answer.txt.",
            "files": files, "test": f"def check(seed):\n    assert read('answer.txt').strip() == '{hit}.txt', 'wrong'",
            "solution": [f"grep -l {target} notes/*.txt | xargs -n1 basename > answer.txt"]}


def fix_python(rng, d):
    """Fix a buggy script; it is then run on hidden inputs."""
    good = "total = 0\nfor line in open('nums.txt'):\n    total += int(line)\nprint(total)\n"
    bad = good.replace("print(total)", "print(totl)")
    xs = _nums(rng, _size(d))
    test = ("def check(seed):\n    import random\n    r = random.Random(seed)\n    for _ in range(3):\n"
            "        xs = [r.randint(-500, 500) for _ in range(r.randint(1, 20))]\n"
            "        write('nums.txt', ''.join(str(x) + '\\n' for x in xs))\n"
            "        out = run(['python3', 'sum.py']).stdout.strip()\n        assert out == str(sum(xs)), (out, sum(xs))")
    return {"instr": "sum.py should print the sum of the integers in nums.txt but it crashes. Fix sum.py.",
            "files": {"sum.py": bad, "nums.txt": "".join(f"{x}\n" for x in xs)}, "test": test,
            "solution": ["python3 sum.py", {"cmd": "sed -i 's/totl/total/' sum.py",
                                              "note": "NameError: totl is a typo for total. Fixing it."}, "python3 sum.py"]}


def write_script(rng, d):
    """Write a shell script; it is run on hidden files."""
    name = "count_words.sh"
    test = ("def check(seed):\n    import random\n    r = random.Random(seed)\n    for i in range(3):\n"
            "        text = ' '.join('w%d' % r.randint(0, 99) for _ in range(r.randint(1, 40)))\n"
            "        write('hidden%d.txt' % i, text + '\\n')\n"
            f"        out = run(['bash', '{name}', 'hidden%d.txt' % i]).stdout.strip()\n"
            "        assert out == str(len(text.split())), (out, len(text.split()))")
    sample = " ".join(rng.choice(WORDS) for _ in range(_size(d)))
    return {"instr": f"Write a bash script {name} that prints the number of words in the file given as its first "
                     f"argument (try it on sample.txt).", "files": {"sample.txt": sample + "\n"}, "test": test,
            "solution": [f"printf '#!/bin/bash\\nwc -w < \"$1\"\\n' > {name}", f"bash {name} sample.txt"]}


def write_filter(rng, d):
    """Write a Python filter; it is run on hidden stdin."""
    test = ("def check(seed):\n    import random\n    r = random.Random(seed)\n    for _ in range(3):\n"
            "        xs = [r.randint(-99, 99) for _ in range(r.randint(0, 15))]\n"
            "        out = run(['python3', 'evens.py'], input=''.join(str(x) + '\\n' for x in xs)).stdout\n"
            "        assert out == ''.join(str(x) + '\\n' for x in xs if x % 2 == 0), out")
    xs = _nums(rng, _size(d))
    return {"instr": "Write evens.py: it reads one integer per line from stdin and prints the even ones, one per line, "
                     "in order (try: python3 evens.py < sample.txt).", "files": {"sample.txt": "".join(f"{x}\n" for x in xs)},
            "test": test, "solution": ["printf 'import sys\\nfor line in sys.stdin:\\n    if int(line) %% 2 == 0:\\n"
                                       "        print(int(line))\\n' > evens.py", "python3 evens.py < sample.txt"]}


VARIANTS: dict[str, Callable[[random.Random, int], dict]] = {f.__name__: f for f in [
    create_file, make_dirs, count_lines, count_matches, sort_numbers, unique_sorted, head_n, tail_n, reverse_lines,
    replace_word, rename_ext, move_logs, delete_tmp, csv_sum, csv_column, csv_filter, json_value, chmod_exec, symlink,
    concat, dedupe, largest_file, line_numbers, env_file, archive, find_word_file, fix_python, write_script,
    write_filter]}


def _typo(cmd: str, files: dict) -> str | None:
    """The command with one input file name mistyped (for error demonstrations), or None."""
    for f in sorted(files, key=len, reverse=True):
        base = f.rsplit("/", 1)[-1]
        if "." in base and len(base) > 5 and re.search(rf"(?<![\w/.]){re.escape(f)}\b", cmd):
            return cmd.replace(f, f.replace(base, base[0] + base[2:]), 1)
    return None


class TerminalDomain(Domain):
    family = "terminal"
    needs_sandbox = True
    multi_step = True
    verify_timeout_s = 180.0

    def __init__(self, variant: str):
        self.variant, self.make = variant, VARIANTS[variant]
        self.name, self.description = f"terminal.{variant}", (self.make.__doc__ or "").strip()

    def build(self, rng: random.Random, difficulty: int) -> dict:
        spec = self.make(rng, difficulty)
        files = dict(spec["files"])
        instr = spec["instr"]
        demo = None
        if difficulty >= 2 and rng.random() < 0.5 and isinstance(spec["solution"][0], str):
            demo = _typo(spec["solution"][0], spec["files"])
        n_cmds = len(spec["solution"]) + (2 if demo else 0)
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": instr}],
                "tools": [BASH], "max_turns": 2 * n_cmds + 4, "files": files,
                "tests": {"source": spec["test"], "seed": rng.randint(0, 2 ** 31)},
                "answer": {"solution": spec["solution"], "typo": demo}}

    def oracle(self, task: Task) -> Iterator[dict]:
        sol, typo = task.answer["solution"], task.answer.get("typo")
        if typo:
            obs = yield {"role": "assistant", "content": "", "tool_calls": [{"name": "bash", "arguments": {"command": typo}}]}
            failed = "No such file" in obs[0] or "cannot" in obs[0] or not obs[0].rstrip().endswith("[exit code: 0]")
            note = ("That file does not exist: I mistyped its name. Let me list the files." if failed else
                    "Let me list the files to be sure of the names.")
            yield {"role": "assistant", "content": note, "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}
        for step in sol:  # a step is a command, or {"cmd", "note"} where the note diagnoses the previous output
            cmd, note = (step, "") if isinstance(step, str) else (step["cmd"], step["note"])
            yield {"role": "assistant", "content": note, "tool_calls": [{"name": "bash", "arguments": {"command": cmd}}]}
        yield {"role": "assistant", "content": "Done."}

    def tool_impls(self, task: Task, pool: Any):
        cm = pool.session(files=task.files, limits=_session_limits())
        sh = cm.__enter__()

        def bash(command: str) -> str:
            r = sh.run(command, timeout_s=CMD_TIMEOUT_S)
            if r.infra_error:
                raise ToolInfraError(f"sandbox failure: {r.infra_error}")
            return sandboxing.observation(r)

        return {"bash": bash}, lambda: cm.__exit__(None, None, None)

    def step_ok(self, task: Task, msg: dict, observations: list[str]) -> bool:
        codes = [EXIT_RE.search(o) for o in observations]
        return len(observations) == len(msg["tool_calls"]) and all(m and m.group(1) == "0" for m in codes)

    def format_ok(self, task: Task, text: str) -> bool:
        return text.strip() == "Done."

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        return grade(pool, task, trajectory)


def _session_limits():
    return sandboxing.limits(wall_s=120.0, output_bytes=8_000_000)


def grade(pool: Any, task: Task, trajectory: list[dict]) -> Reward:
    """Replay the commands, snapshot the work dir, run the hidden test on the snapshot in a fresh sandbox."""
    final_done = (trajectory[-1].get("content") or "").strip() == "Done."
    cmds, bad = [], []
    for _, c in tool_calls(trajectory):
        a = c.get("arguments") if isinstance(c, dict) else None
        if isinstance(c, dict) and c.get("name") == "bash" and isinstance(a, dict) and set(a) == {"command"} \
                and isinstance(a["command"], str):
            cmds.append(a["command"])
        else:
            bad.append(c)
    with pool.session(files=task.files, limits=_session_limits()) as sh:
        root = sh.run("pwd", timeout_s=CMD_TIMEOUT_S)
        if root.infra_error or root.exit_code != 0:
            return Reward.infra(f"sandbox session did not start: {root.infra_error or root.stderr[:200]}")
        root_dir = root.stdout.strip().splitlines()[-1]
        for cmd in cmds:
            r = sh.run(cmd, timeout_s=CMD_TIMEOUT_S)
            if r.infra_error:
                return Reward.infra(f"sandbox failed while replaying: {r.infra_error}")
        snap = sh.run(f"cd '{root_dir}' && {SNAPSHOT}", timeout_s=60)
    if snap.infra_error:
        return Reward.infra(f"sandbox failed during the snapshot: {snap.infra_error}")
    out = snap.stdout or ""
    if snap.exit_code != 0 or "SNAP:" not in out or getattr(snap, "stdout_truncated", False):
        return Reward.fail("could not snapshot the work dir (too large, or the shell was closed by the commands)",
                           exit_code=snap.exit_code)
    tarball = base64.b64decode(out.split("SNAP:", 1)[1].strip())
    nonce = "TEST-" + secrets.token_hex(12)
    src = RUNNER_HEAD + task.tests["source"] + "\n" + RUNNER_TAIL
    r = pool.run(sandboxing.task(cmd=["python3", "-I", "_grade.py"], files={"_grade.py": src, "ws.tar.gz": tarball},
                                 stdin=json.dumps({"nonce": nonce, "seed": task.tests["seed"]}),
                                 limits=sandboxing.limits(wall_s=60.0)))
    if r.infra_error:
        return Reward.infra(f"sandbox failed while testing: {r.infra_error}")
    lines = [ln for ln in (r.stdout or "").split("\n") if ln.startswith(nonce + " ")]
    if not lines:
        return Reward.fail("the hidden test did not report", exit_code=r.exit_code, timed_out=r.timed_out,
                           stderr=sandboxing.clip(r.stderr, 300))
    verdict = json.loads(lines[-1][len(nonce) + 1:])
    details = {**verdict, "commands": len(cmds), "final_is_done": final_done}
    if bad:
        details["invalid_calls"] = len(bad)
        return Reward(0.0, False, details)
    ok = verdict["passed"] and final_done
    return Reward(1.0 if ok else 0.0, ok, details)


def domains() -> list[TerminalDomain]:
    return [TerminalDomain(v) for v in VARIANTS]
