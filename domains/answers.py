"""Strict final-answer parsing shared by the single-answer families (math, retrieval, docs, agent).

The final assistant message ends with exactly one line "Answer: <value>" (one space after the colon,
nothing after the value). Lines before it are free-form working. Anything else fails: "answer: 5",
"Answer:5", "Answer: 5 apples", "Answer: 5.0" where an integer is asked, "$5", "1,000".
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

ANSWER_RE = re.compile(r"Answer: (\S(?:.*\S)?)")
INT_RE = re.compile(r"-?(0|[1-9]\d*)")
DEC_RE = {n: re.compile(r"-?(0|[1-9]\d*)\.\d{%d}" % n) for n in range(1, 5)}
FRAC_RE = re.compile(r"-?[1-9]\d*/[1-9]\d*|0")
WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


def answer_line(text: str) -> str | None:
    """The value after 'Answer: ' on the last non-empty line, or None if that line is not an answer line."""
    lines = [ln for ln in text.strip("\n").split("\n")]
    if not lines or not text.strip():
        return None
    m = ANSWER_RE.fullmatch(lines[-1])
    if not m or sum(1 for ln in lines if ln.startswith("Answer:")) != 1:
        return None  # exactly one answer line, and it is the last: no hedging with several answers
    return m.group(1)


def fmt_dec(v, places: int = 2) -> str:
    """Fixed decimals, rounding half away from zero (what people expect from "round to 2 places")."""
    with localcontext() as ctx:  # local: never touch the caller's decimal context
        ctx.prec = 60
        d = Decimal(v.numerator) / Decimal(v.denominator) if isinstance(v, Fraction) else Decimal(str(v))
        s = str(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))
    return s[1:] if s.startswith("-") and not s.strip("-0.") else s  # no "-0.00"


def fmt_frac(fr: Fraction) -> str:
    return "0" if fr == 0 else f"{fr.numerator}/{fr.denominator}"


def match(kind: str, got: str | None, want: str, tol: float = 0.0) -> tuple[bool, str]:
    """(ok, reason). kind: 'int' | 'dec1'..'dec4' (fixed decimals, |got-want| <= tol) | 'frac' (reduced) | 'word' | 'text'."""
    if got is None:
        return False, "no final line of the form 'Answer: <value>'"
    if kind == "int":
        if not INT_RE.fullmatch(got):
            return False, f"answer {got[:40]!r} is not a plain integer"
        return (int(got) == int(want)), f"got {got}, want {want}"
    if kind.startswith("dec"):
        n = int(kind[3:])
        if not DEC_RE[n].fullmatch(got):
            return False, f"answer {got[:40]!r} is not a number with exactly {n} decimals"
        return abs(float(got) - float(want)) <= tol + 1e-9, f"got {got}, want {want} (tolerance {tol})"
    if kind == "frac":
        if not FRAC_RE.fullmatch(got):
            return False, f"answer {got[:40]!r} is not a fraction a/b"
        fr = Fraction(got)
        if got != fmt_frac(fr):
            return False, f"fraction {got} is not in lowest terms"
        return got == want, f"got {got}, want {want}"
    if kind == "word":
        if not WORD_RE.fullmatch(got):
            return False, f"answer {got[:40]!r} is not a single word"
        return got == want, f"got {got}, want {want}"
    if kind == "text":
        return got == want, f"got {got[:60]!r}, want {want!r}"
    raise ValueError(f"unknown answer kind {kind!r}")
