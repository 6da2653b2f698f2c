"""Professional document analysis: synthetic annual reports (income statement, balance sheet, cash flow,
footnotes with cross-references, every line numbered L01, L02, ...). Extract a field, compute a ratio, or
follow a cross-reference into a note, and cite the source lines.

Final message: free working, then exactly two last lines
    Answer: <value>
    Source: L07, L12
Values: amounts as plain integers in thousands (no commas, no $); ratios with exactly 2 decimals, tolerance
+-0.01 (percentages without the % sign). The cited set must equal the lines used. Answer right but citation
wrong scores 0.5 and does not pass.
Difficulty: 0 = only the needed lines (+1 distractor), 1 = full income statement and balance sheet,
2 = three statements, two years, all notes, 3 = plus distractor notes and prior-year questions.

    .venv/bin/python -m domains sample docs.gross_margin --seed 0 --difficulty 2
"""
from __future__ import annotations

import random
import re
from typing import Any, Callable, Iterator

from domains import answers
from domains.core import Domain, Reward, Task

IS = [("revenue", "Revenue (see Note 2)"), ("cogs", "Cost of revenue"), ("gross_profit", "Gross profit"),
      ("rnd", "Research and development"), ("sga", "Selling, general and administrative (see Note 5)"),
      ("operating_income", "Operating income"), ("interest", "Interest expense"),
      ("pretax", "Income before income taxes"), ("tax", "Income tax expense"), ("net_income", "Net income")]
BS = [("cash", "Cash and cash equivalents"), ("receivables", "Accounts receivable"), ("inventory", "Inventories"),
      ("current_assets", "Total current assets"), ("ppe", "Property, plant and equipment, net"),
      ("total_assets", "Total assets"), ("payables", "Accounts payable"), ("short_debt", "Short-term borrowings"),
      ("current_liabilities", "Total current liabilities"), ("long_debt", "Long-term debt (see Note 3)"),
      ("total_liabilities", "Total liabilities"), ("equity", "Total shareholders' equity"),
      ("liab_equity", "Total liabilities and equity")]
CF = [("ocf", "Net cash provided by operating activities"), ("capex", "Capital expenditures"),
      ("dividends", "Dividends paid")]
NOTES = ["note_one_time", "note_debt", "note_segment", "note_restructuring"]
COMPANIES = ["Norvale", "Quillon", "Brightfield", "Castor", "Meridian", "Oakhurst", "Tessel", "Valmont", "Zephyr"]


def _year(rng: random.Random, revenue: int) -> dict[str, int]:
    v: dict[str, int] = {}
    r = v["revenue"] = revenue
    v["cogs"] = r * rng.randint(400, 700) // 1000
    v["gross_profit"] = r - v["cogs"]
    v["rnd"] = r * rng.randint(30, 100) // 1000
    v["sga"] = r * rng.randint(80, 180) // 1000
    v["operating_income"] = v["gross_profit"] - v["rnd"] - v["sga"]
    v["interest"] = max(1, v["operating_income"] * rng.randint(30, 200) // 1000)
    v["pretax"] = v["operating_income"] - v["interest"]
    v["tax"] = v["pretax"] * rng.randint(150, 300) // 1000
    v["net_income"] = v["pretax"] - v["tax"]
    v["cash"], v["receivables"], v["inventory"] = (r * rng.randint(10 * a, 10 * b) // 1000 for a, b in ((5, 30), (8, 20), (5, 15)))
    v["current_assets"] = v["cash"] + v["receivables"] + v["inventory"]
    v["ppe"] = r * rng.randint(200, 900) // 1000
    v["total_assets"] = v["current_assets"] + v["ppe"]
    v["payables"], v["short_debt"] = (v["total_assets"] * rng.randint(10 * a, 10 * b) // 1000 for a, b in ((4, 12), (2, 10)))
    v["current_liabilities"] = v["payables"] + v["short_debt"]
    v["long_debt"] = v["total_assets"] * rng.randint(100, 350) // 1000
    v["total_liabilities"] = v["current_liabilities"] + v["long_debt"]
    v["equity"] = v["total_assets"] - v["total_liabilities"]
    v["liab_equity"] = v["total_assets"]
    v["ocf"] = v["net_income"] + v["ppe"] * rng.randint(50, 150) // 1000
    v["capex"] = v["ppe"] * rng.randint(50, 250) // 1000
    v["dividends"] = v["net_income"] * rng.randint(0, 400) // 1000
    v["note_one_time"] = r * rng.randint(10, 80) // 1000
    v["note_segment"] = r * rng.randint(200, 600) // 1000          # services segment revenue
    v["note_restructuring"] = v["sga"] * rng.randint(50, 300) // 1000
    v["note_debt"] = v["long_debt"] * rng.randint(300, 700) // 1000  # term loan part of long-term debt
    return v


def _c(n: int) -> str:
    return f"{n:,}"


def _note_lines(key: str, y: int, cur: dict, prev: dict | None) -> list[tuple[str | None, str]]:
    pv = lambda k: f" ({y - 1}: {_c(prev[k])})" if prev else ""  # noqa: E731
    if key == "note_one_time":
        return [(None, "Note 2 - Revenue"),
                ("note_one_time", f"Revenue for {y} includes one-time licensing revenue of {_c(cur[key])}{pv(key)}.")]
    if key == "note_debt":
        return [(None, "Note 3 - Long-term debt"),
                ("note_debt", f"Long-term debt at the end of {y} includes a term loan of {_c(cur[key])}{pv(key)}; "
                              f"the rest are senior notes.")]
    if key == "note_segment":
        return [(None, "Note 4 - Segments"),
                ("note_segment", f"The Services segment contributed revenue of {_c(cur[key])} in {y}{pv(key)}; "
                                 f"the rest came from Products.")]
    return [(None, "Note 5 - Restructuring"),
            ("note_restructuring", f"Selling, general and administrative expense for {y} includes a restructuring "
                                   f"charge of {_c(cur[key])}{pv(key)}.")]


DISTRACTOR_NOTES = [
    "Note 6 - Leases. Operating lease payments due within one year total {a}; after five years {b}.",
    "Note 7 - Subsequent events. In January the board approved a share buyback of up to {a}.",
    "Note 8 - Employees. Headcount was {b} at year end; pension obligations were {a}.",
]


def render_report(rng: random.Random, difficulty: int, need: set[str], two_years: bool = False
                  ) -> tuple[list[str], dict, dict, int]:
    """Numbered report lines, {fact key: line id}, the facts {"cur": .., "prev": ..}, the current year."""
    y = rng.randint(2015, 2024)
    scale = rng.choice([2_000, 20_000, 200_000])
    prev = _year(rng, rng.randint(scale, 8 * scale))
    cur = _year(rng, prev["revenue"] * rng.randint(850, 1300) // 1000)  # the current year is near the prior one
    two_years = two_years or difficulty >= 2
    rows: list[tuple[str | None, str]] = [(None, f"{rng.choice(COMPANIES)} Inc. - Annual Report {y} "
                                                 f"(amounts in thousands of USD)")]
    head = f"Item | {y} | {y - 1}" if two_years else f"Item | {y}"

    def table(title: str, items: list[tuple[str, str]]):
        keep = [(k, lab) for k, lab in items if difficulty >= 1 or k in need or (k, lab) == items[-1]]
        if difficulty == 0 and not any(k in need for k, _ in keep):
            return
        rows.append((None, title))
        rows.append((None, head))
        for k, lab in keep:
            rows.append((k, f"{lab} | {_c(cur[k])}" + (f" | {_c(prev[k])}" if two_years else "")))

    table("Consolidated Statement of Income", IS)
    table("Consolidated Balance Sheet", BS)
    if difficulty >= 2 or need & {k for k, _ in CF}:
        table("Consolidated Statement of Cash Flows", CF)
    notes = [n for n in NOTES if difficulty >= 2 or n in need]
    if notes:
        rows.append((None, "Notes to the financial statements"))
        rows.append((None, "Note 1 - Basis of presentation. All amounts are in thousands of USD."))
    for n in notes:
        rows += _note_lines(n, y, cur, prev if two_years else None)
    if difficulty >= 3:
        for t in DISTRACTOR_NOTES:
            rows.append((None, t.format(a=_c(rng.randint(100, 90_000)), b=_c(rng.randint(100, 9_000)))))
    lines, where = [], {}
    for i, (k, text) in enumerate(rows, 1):
        lid = f"L{i:02d}"
        lines.append(f"{lid} {text}")
        if k:
            where[k] = lid
    return lines, where, {"cur": cur, "prev": prev}, y


# metric: (needed facts, question, compute(values) -> number, kind)
Metric = tuple[list[str], str, Callable[[dict], Any], str]
EXTRACT = {k: lab.split(" (")[0] for k, lab in IS + BS + CF}
METRICS: dict[str, Metric] = {
    **{k: ([k], f"What is {EXTRACT[k].lower()}", lambda v, k=k: v[k], "int") for k in
       ["revenue", "net_income", "operating_income", "total_assets", "cash", "inventory", "long_debt", "equity",
        "ocf", "capex"]},
    "gross_margin": (["gross_profit", "revenue"], "What is the gross margin in percent (gross profit / revenue x 100)",
                     lambda v: 100 * v["gross_profit"] / v["revenue"], "dec2"),
    "operating_margin": (["operating_income", "revenue"], "What is the operating margin in percent "
                         "(operating income / revenue x 100)", lambda v: 100 * v["operating_income"] / v["revenue"], "dec2"),
    "net_margin": (["net_income", "revenue"], "What is the net margin in percent (net income / revenue x 100)",
                   lambda v: 100 * v["net_income"] / v["revenue"], "dec2"),
    "current_ratio": (["current_assets", "current_liabilities"], "What is the current ratio "
                      "(total current assets / total current liabilities)",
                      lambda v: v["current_assets"] / v["current_liabilities"], "dec2"),
    "quick_ratio": (["current_assets", "inventory", "current_liabilities"], "What is the quick ratio "
                    "((total current assets - inventories) / total current liabilities)",
                    lambda v: (v["current_assets"] - v["inventory"]) / v["current_liabilities"], "dec2"),
    "debt_to_equity": (["short_debt", "long_debt", "equity"], "What is the debt-to-equity ratio "
                       "((short-term borrowings + long-term debt) / total shareholders' equity)",
                       lambda v: (v["short_debt"] + v["long_debt"]) / v["equity"], "dec2"),
    "roe": (["net_income", "equity"], "What is the return on equity in percent (net income / total shareholders' "
            "equity x 100)", lambda v: 100 * v["net_income"] / v["equity"], "dec2"),
    "interest_coverage": (["operating_income", "interest"], "What is the interest coverage "
                          "(operating income / interest expense)", lambda v: v["operating_income"] / v["interest"], "dec2"),
    "asset_turnover": (["revenue", "total_assets"], "What is the asset turnover (revenue / total assets)",
                       lambda v: v["revenue"] / v["total_assets"], "dec2"),
    "free_cash_flow": (["ocf", "capex"], "What is free cash flow in thousands (net cash provided by operating "
                       "activities - capital expenditures)", lambda v: v["ocf"] - v["capex"], "int"),
    "one_time_revenue": (["note_one_time"], "How much one-time licensing revenue (see the note referenced by the "
                         "revenue line) is included in revenue, in thousands", lambda v: v["note_one_time"], "int"),
    "adjusted_revenue": (["revenue", "note_one_time"], "What is revenue excluding the one-time licensing revenue "
                         "described in the note referenced by the revenue line, in thousands",
                         lambda v: v["revenue"] - v["note_one_time"], "int"),
    "services_revenue": (["note_segment"], "How much revenue did the Services segment contribute, in thousands",
                         lambda v: v["note_segment"], "int"),
    "products_revenue": (["revenue", "note_segment"], "How much revenue came from the Products segment "
                         "(revenue - Services segment revenue), in thousands",
                         lambda v: v["revenue"] - v["note_segment"], "int"),
    "adjusted_operating_income": (["operating_income", "note_restructuring"], "What is operating income excluding "
                                  "the restructuring charge described in the note referenced by the SG&A line, "
                                  "in thousands", lambda v: v["operating_income"] + v["note_restructuring"], "int"),
    "term_loan_share": (["note_debt", "long_debt"], "What share of long-term debt is the term loan, in percent "
                        "(term loan / long-term debt x 100)", lambda v: 100 * v["note_debt"] / v["long_debt"], "dec2"),
}
GROWTH = "revenue_growth"

SYSTEM = ("Answer from the report. End with two lines: 'Answer: <value>' (integers in thousands without commas, "
          "or exactly 2 decimals for ratios and percents, no % sign) and 'Source: <line ids>' (e.g. Source: L03, L07).")
SOURCE_RE = re.compile(r"Source: (L\d{2,3}(?:, L\d{2,3})*)")


class DocsDomain(Domain):
    family = "docs"

    def __init__(self, metric: str):
        self.metric = metric
        self.name = f"docs.{metric}"
        self.description = (METRICS[metric][1] if metric in METRICS else "Year-over-year revenue growth") + "?"

    def build(self, rng: random.Random, difficulty: int) -> dict:
        if self.metric == GROWTH:
            need, kind = ["revenue"], "dec2"
        else:
            need, question, fn, kind = METRICS[self.metric]
        lines, where, facts, y = render_report(rng, difficulty, set(need), two_years=self.metric == GROWTH)
        if self.metric == GROWTH:
            c, p = facts["cur"]["revenue"], facts["prev"]["revenue"]
            value = 100 * (c - p) / p
            q = (f"What was revenue growth from {y - 1} to {y} in percent "
                 f"((revenue {y} - revenue {y - 1}) / revenue {y - 1} x 100)?")
        else:
            year = y - 1 if difficulty >= 3 and rng.random() < 0.5 else y
            value = fn(facts["cur"] if year == y else facts["prev"])
            q = f"{question} for {year}?"
        ans = answers.fmt_dec(value, 2) if kind == "dec2" else str(int(value))
        cite = sorted({where[k] for k in need})
        user = "\n".join(lines) + "\n\n" + q
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                "answer": {"value": ans, "kind": kind, "tol": 0.01 if kind == "dec2" else 0.0, "source": cite}}

    def oracle(self, task: Task) -> Iterator[dict]:
        a = task.answer
        yield {"role": "assistant", "content": f"Answer: {a['value']}\nSource: {', '.join(a['source'])}"}

    @staticmethod
    def parse(text: str) -> tuple[str | None, list[str] | None]:
        lines = text.strip("\n").split("\n")
        if len(lines) < 2:
            return None, None
        m = SOURCE_RE.fullmatch(lines[-1])
        return answers.answer_line("\n".join(lines[:-1])), (m.group(1).split(", ") if m else None)

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        a = task.answer
        got, cited = self.parse(trajectory[-1].get("content") or "")
        ok, why = answers.match(a["kind"], got, a["value"], a["tol"])
        cite_ok = cited is not None and sorted(set(cited)) == a["source"] and len(cited) == len(set(cited))
        details = {"reason": why, "cited": cited, "want_source": a["source"]}
        if not ok:
            return Reward(0.0, False, details)
        return Reward(1.0 if cite_ok else 0.5, cite_ok, details)

    def format_ok(self, task: Task, text: str) -> bool:
        got, cited = self.parse(text)
        return got is not None and cited is not None


def domains() -> list[DocsDomain]:
    return [DocsDomain(m) for m in [*METRICS, GROWTH]]
