"""Math and arithmetic reasoning: one domain per operation / word-problem template; difficulty scales magnitudes
and the number of terms. Final line 'Answer: <value>' (integer, fixed decimals, reduced fraction, or digits).

    .venv/bin/python -m domains sample math.add --seed 0 --difficulty 0
"""
from __future__ import annotations

import math
import random
from fractions import Fraction

from domains.answers import fmt_dec, fmt_frac
from domains.base import AnswerDomain, Q

NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lea", "Mo", "Nia"]
ITEMS = ["apples", "books", "coins", "pens", "cards", "shells", "stamps", "marbles", "boxes", "cups"]


def _n(rng: random.Random, d: int, lo_digits: int = 1) -> int:
    """A positive number with about (1, 2, 3, 5)[d] digits."""
    digits = max(lo_digits, (1, 2, 3, 5)[d])
    return rng.randint(1 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def add(rng, d):
    """Sum of (2, 2, 3, 4)[d] numbers."""
    xs = [_n(rng, d) for _ in range((2, 2, 3, 4)[d])]
    return Q(f"What is {' + '.join(map(str, xs))}?", str(sum(xs)))


def sub(rng, d):
    """Difference a - b (may be negative)."""
    a, b = _n(rng, d), _n(rng, d)
    return Q(f"What is {a} - {b}?", str(a - b))


def mul(rng, d):
    """Product of two numbers."""
    a, b = _n(rng, d), _n(rng, max(0, d - 1))
    return Q(f"What is {a} * {b}?", str(a * b))


def div_exact(rng, d):
    """Exact integer division."""
    b, q = _n(rng, max(0, d - 1)) + 1, _n(rng, d)
    return Q(f"What is {b * q} / {b}?", str(q))


def mod(rng, d):
    """Remainder a mod b."""
    a, b = _n(rng, d) + 10, rng.randint(2, (5, 12, 50, 999)[d])
    return Q(f"What is the remainder when {a} is divided by {b}?", str(a % b))


def power(rng, d):
    """Integer power."""
    b, e = rng.randint(2, (5, 9, 12, 20)[d]), rng.randint(2, (3, 4, 6, 9)[d])
    return Q(f"What is {b}^{e}?", str(b ** e))


def gcd(rng, d):
    """Greatest common divisor."""
    g = rng.randint(1, (5, 12, 40, 300)[d])
    a, b = g * _n(rng, max(0, d - 1)), g * _n(rng, max(0, d - 1))
    return Q(f"What is the greatest common divisor of {a} and {b}?", str(math.gcd(a, b)))


def lcm(rng, d):
    """Least common multiple."""
    a, b = rng.randint(2, (9, 20, 60, 400)[d]), rng.randint(2, (9, 20, 60, 400)[d])
    return Q(f"What is the least common multiple of {a} and {b}?", str(a * b // math.gcd(a, b)))


def _expr(rng, d, parens):
    n_ops = (1, 2, 3, 5)[d]
    s = str(rng.randint(1, 9 if d < 2 else 30))
    for _ in range(n_ops):
        op, x = rng.choice("+-*"), str(rng.randint(1, 9 if d < 2 else 30))
        s = f"({s} {op} {x})" if parens and rng.random() < 0.5 else f"{s} {op} {x}"
    return s


def expr(rng, d):
    """Mixed + - * expression with operator precedence."""
    e = _expr(rng, d, False)
    return Q(f"Evaluate {e}", str(eval(e)))  # noqa: S307 - our own generated digits and operators only


def paren_expr(rng, d):
    """Expression with parentheses."""
    e = _expr(rng, d, True)
    return Q(f"Evaluate {e}", str(eval(e)))  # noqa: S307


def linear_eq(rng, d):
    """Solve a*x + b = c for integer x."""
    x, a, b = rng.randint(-(3, 10, 50, 500)[d], (3, 10, 50, 500)[d]), rng.randint(2, (5, 9, 20, 99)[d]), _n(rng, d)
    return Q(f"Solve for x: {a}x + {b} = {a * x + b}", str(x))


def percent(rng, d):
    """p percent of n (integer result)."""
    p = rng.choice((10, 20, 25, 50) if d == 0 else (5, 10, 15, 20, 25, 30, 40, 60, 75, 80))
    n = 20 * _n(rng, d)
    return Q(f"What is {p}% of {n}?", str(p * n // 100))


def fraction_add(rng, d):
    """Sum of fractions, reduced."""
    k = (2, 2, 3, 4)[d]
    fr = [Fraction(rng.randint(1, 9), rng.randint(2, (5, 9, 12, 20)[d])) for _ in range(k)]
    text = " + ".join(f"{f.numerator}/{f.denominator}" for f in fr)
    return Q(f"What is {text}? Give the result as a reduced fraction.", fmt_frac(sum(fr, Fraction(0))), kind="frac")


def mean(rng, d):
    """Arithmetic mean of a list (exact integer)."""
    k = (3, 4, 6, 10)[d]
    xs = [_n(rng, min(d, 2)) for _ in range(k - 1)]
    last = k * (sum(xs) // k + 1) - sum(xs)  # make the mean an integer; last stays positive
    xs.append(last)
    return Q(f"What is the mean of {', '.join(map(str, xs))}?", str(sum(xs) // k))


def median(rng, d):
    """Median of an odd-length list."""
    xs = [_n(rng, min(d, 2)) for _ in range((3, 5, 9, 15)[d])]
    return Q(f"What is the median of {', '.join(map(str, xs))}?", str(sorted(xs)[len(xs) // 2]))


def maximum(rng, d):
    """Largest number in a list."""
    xs = [rng.randint(-99, 99) if d >= 2 else _n(rng, d) for _ in range((3, 6, 12, 25)[d])]
    return Q(f"What is the largest of {', '.join(map(str, xs))}?", str(max(xs)))


def range_(rng, d):
    """Max minus min of a list."""
    xs = [_n(rng, min(d, 2)) for _ in range((3, 6, 12, 25)[d])]
    return Q(f"What is the range (largest minus smallest) of {', '.join(map(str, xs))}?", str(max(xs) - min(xs)))


def digit_sum(rng, d):
    """Sum of the decimal digits."""
    n = _n(rng, d, lo_digits=2) * (10 ** (2 * d))
    n += rng.randint(0, 10 ** (2 * d) - 1) if d else 0
    return Q(f"What is the sum of the digits of {n}?", str(sum(map(int, str(n)))))


def factorial(rng, d):
    """n factorial."""
    n = rng.randint((1, 4, 7, 12)[d], (4, 7, 12, 20)[d])
    return Q(f"What is {n}! (factorial)?", str(math.factorial(n)))


def fib(rng, d):
    """n-th Fibonacci number (F1 = F2 = 1)."""
    n = rng.randint((1, 6, 15, 30)[d], (6, 15, 30, 60)[d])
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return Q(f"With F1 = F2 = 1 and F(n) = F(n-1) + F(n-2), what is F{n}?", str(a))


def prime_count(rng, d):
    """How many primes are <= n."""
    n = rng.randint(2, (12, 50, 200, 1000)[d])
    cnt = sum(all(k % p for p in range(2, int(k ** 0.5) + 1)) for k in range(2, n + 1))
    return Q(f"How many prime numbers are less than or equal to {n}?", str(cnt))


def to_binary(rng, d):
    """Decimal to binary digits."""
    n = rng.randint(1, (15, 255, 4095, 2 ** 20)[d])
    return Q(f"Write {n} in binary (digits only, no prefix).", format(n, "b"), kind="text")


def to_hex(rng, d):
    """Decimal to lowercase hexadecimal."""
    n = rng.randint(10, (255, 4095, 65535, 2 ** 32)[d])
    return Q(f"Write {n} in lowercase hexadecimal (no 0x prefix).", format(n, "x"), kind="text")


def from_binary(rng, d):
    """Binary to decimal."""
    n = rng.randint(1, (15, 255, 4095, 2 ** 20)[d])
    return Q(f"What is the binary number {n:b} in decimal?", str(n))


def round_dec(rng, d):
    """Round a decimal to 2 places."""
    x = rng.randint(0, 10 ** (d + 2) * 1000) / 10 ** (3 + (d > 1))
    return Q(f"Round {x} to 2 decimal places.", fmt_dec(Fraction(str(x)), 2), kind="dec2")


def decimal_add(rng, d):
    """Sum of decimals with 2 places."""
    xs = [Fraction(rng.randint(1, 10 ** (d + 3)), 100) for _ in range((2, 2, 3, 4)[d])]
    return Q(f"What is {' + '.join(fmt_dec(x, 2) for x in xs)}?", fmt_dec(sum(xs, Fraction(0)), 2), kind="dec2")


def square_root(rng, d):
    """Integer square root of a perfect square."""
    r = rng.randint(1, (10, 30, 200, 5000)[d])
    return Q(f"What is the square root of {r * r}?", str(r))


def count_divisors(rng, d):
    """Number of positive divisors."""
    n = rng.randint(2, (20, 100, 1000, 100000)[d])
    return Q(f"How many positive divisors does {n} have?", str(sum(1 for k in range(1, n + 1) if n % k == 0)))


def arith_seq(rng, d):
    """n-th term of an arithmetic sequence."""
    a, step, n = rng.randint(-9, 20), rng.randint(-9, 12) or 3, rng.randint(5, (6, 12, 50, 500)[d])
    shown = ", ".join(str(a + step * i) for i in range(4))
    return Q(f"The sequence {shown}, ... continues the same way. What is term number {n}?", str(a + step * (n - 1)))


def geom_seq(rng, d):
    """n-th term of a geometric sequence."""
    a, r, n = rng.randint(1, 5), rng.randint(2, (3, 3, 4, 7)[d]), rng.randint(4, (5, 8, 12, 20)[d])
    shown = ", ".join(str(a * r ** i) for i in range(3))
    return Q(f"The sequence {shown}, ... multiplies by the same factor each time. What is term number {n}?",
             str(a * r ** (n - 1)))


def word_total(rng, d):
    """Word problem: people collect items, total."""
    who = rng.sample(NAMES, (2, 2, 3, 5)[d])
    item = rng.choice(ITEMS)
    xs = [_n(rng, min(d, 2)) for _ in who]
    parts = ". ".join(f"{w} has {x} {item}" for w, x in zip(who, xs))
    return Q(f"{parts}. How many {item} do they have in total?", str(sum(xs)),
             working=" + ".join(map(str, xs)) + f" = {sum(xs)}" if d >= 2 else "")


def word_left(rng, d):
    """Word problem: start, give away, buy more."""
    w, item = rng.choice(NAMES), rng.choice(ITEMS)
    a = _n(rng, d) + 20
    g = rng.randint(1, a - 1)
    b = _n(rng, max(0, d - 1)) if d >= 1 else 0
    text = f"{w} has {a} {item} and gives away {g}."
    if d >= 1:
        text += f" Then {w} buys {b} more."
    return Q(f"{text} How many {item} does {w} have now?", str(a - g + b))


def word_rate(rng, d):
    """Word problem: distance = speed x time."""
    v, t = rng.randint(2, (9, 60, 120, 900)[d]), rng.randint(2, (5, 9, 24, 72)[d])
    return Q(f"A train travels at {v} km per hour for {t} hours. How many km does it travel?", str(v * t))


def word_price(rng, d):
    """Word problem: cost of several items plus a fee."""
    p, q = rng.randint(2, (9, 30, 99, 999)[d]), rng.randint(2, (5, 12, 40, 200)[d])
    fee = rng.randint(1, 20) if d >= 2 else 0
    text = f"One {rng.choice(ITEMS)[:-1]} costs {p} dollars. What do {q} of them cost"
    text += f", plus a {fee} dollar delivery fee?" if fee else "?"
    return Q(text, str(p * q + fee))


def word_share(rng, d):
    """Word problem: share equally, count the remainder."""
    k = rng.randint(2, (4, 9, 15, 40)[d])
    n = k * rng.randint(1, (5, 12, 50, 500)[d]) + rng.randint(0, k - 1)
    item = rng.choice(ITEMS)
    return Q(f"{n} {item} are shared equally among {k} children, each getting as many as possible. "
             f"How many {item} are left over?", str(n % k))


def abs_diff(rng, d):
    """Absolute difference of signed numbers."""
    a, b = rng.randint(-10 ** (d + 1), 10 ** (d + 1)), rng.randint(-10 ** (d + 1), 10 ** (d + 1))
    return Q(f"What is |{a} - ({b})|?", str(abs(a - b)))


VARIANTS = [add, sub, mul, div_exact, mod, power, gcd, lcm, expr, paren_expr, linear_eq, percent, fraction_add,
            mean, median, maximum, range_, digit_sum, factorial, fib, prime_count, to_binary, to_hex, from_binary,
            round_dec, decimal_add, square_root, count_divisors, arith_seq, geom_seq, word_total, word_left,
            word_rate, word_price, word_share, abs_diff]


def domains() -> list[AnswerDomain]:
    out = []
    for fn in VARIANTS:
        kind = "frac" if fn is fraction_add else "dec2" if fn in (round_dec, decimal_add) else \
            "text" if fn in (to_binary, to_hex) else "int"
        out.append(AnswerDomain(f"math.{fn.__name__.rstrip('_')}", "math", fn, kind=kind))
    return out
