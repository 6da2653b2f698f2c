"""The problem bank of the code family: signature, description, reference solution, input generator.

Every reference ends with a top-level `    return ...` line (the oracle's error demonstrations rely on it).
Input generators take (rng, difficulty); difficulty >= 1 adds edge cases (empty inputs, negatives, ties).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable


@dataclass
class Problem:
    name: str
    signature: str        # "def f(xs: list[int]) -> int:"
    doc: str
    ref: str              # full reference source
    gen: Callable[[random.Random, int], list]  # -> list of positional args


def _ints(rng, d, lo=-50, hi=50, n=None):
    n = rng.randint(1 if d == 0 else 0, (5, 8, 12, 30)[d]) if n is None else n
    return [rng.randint(lo if d else 0, hi) for _ in range(n)]


def _word(rng, k=None):
    return "".join(rng.choice("abcdeilmnorstu") for _ in range(k or rng.randint(1, 8)))


def _sentence(rng, d):
    return " ".join(_word(rng) for _ in range(rng.randint(1 if d == 0 else 0, (4, 6, 10, 20)[d])))


P = Problem
PROBLEMS = [
    P("add_two", "def add_two(a: int, b: int) -> int:", "Return a + b.",
      "def add_two(a, b):\n    return a + b", lambda r, d: [r.randint(-10 ** (d + 1), 10 ** (d + 1)) for _ in range(2)]),
    P("max_of_list", "def max_of_list(xs: list[int]) -> int:", "Return the largest number in the non-empty list xs.",
      "def max_of_list(xs):\n    return max(xs)", lambda r, d: [_ints(r, d, n=r.randint(1, (5, 8, 12, 30)[d]))]),
    P("sum_list", "def sum_list(xs: list[int]) -> int:", "Return the sum of xs (0 for an empty list).",
      "def sum_list(xs):\n    return sum(xs)", lambda r, d: [_ints(r, d)]),
    P("count_vowels", "def count_vowels(s: str) -> int:", "Return how many characters of s are vowels (aeiou, lowercase or uppercase).",
      "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
      lambda r, d: [_sentence(r, d).upper() if d >= 2 and r.random() < 0.5 else _sentence(r, d)]),
    P("reverse_string", "def reverse_string(s: str) -> str:", "Return s reversed.",
      "def reverse_string(s):\n    return s[::-1]", lambda r, d: [_sentence(r, d)]),
    P("is_palindrome", "def is_palindrome(s: str) -> bool:", "Return True if s reads the same forwards and backwards.",
      "def is_palindrome(s):\n    return s == s[::-1]",
      lambda r, d: [(lambda w: w + w[::-1][r.randint(0, 1):])(_word(r)) if r.random() < 0.5 else _word(r)]),
    P("fizzbuzz", "def fizzbuzz(n: int) -> str:",
      "Return 'FizzBuzz' if n is divisible by 15, 'Fizz' if by 3, 'Buzz' if by 5, else str(n).",
      "def fizzbuzz(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n        return 'Fizz'\n"
      "    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)", lambda r, d: [r.randint(1, 10 ** (d + 2))]),
    P("factorial", "def factorial(n: int) -> int:", "Return n! (0! is 1).",
      "def factorial(n):\n    out = 1\n    for k in range(2, n + 1):\n        out *= k\n    return out",
      lambda r, d: [r.randint(0 if d else 1, (6, 10, 20, 40)[d])]),
    P("fibonacci", "def fibonacci(n: int) -> int:", "Return the n-th Fibonacci number with fibonacci(0) = 0, fibonacci(1) = 1.",
      "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
      lambda r, d: [r.randint(0 if d else 1, (10, 20, 60, 300)[d])]),
    P("is_prime", "def is_prime(n: int) -> bool:", "Return True if n is a prime number (n may be 0, 1 or negative).",
      "def is_prime(n):\n    if n < 2:\n        return False\n    k = 2\n    while k * k <= n:\n        if n % k == 0:\n"
      "            return False\n        k += 1\n    return True", lambda r, d: [r.randint(-3 if d else 2, (30, 200, 5000, 10 ** 6)[d])]),
    P("gcd", "def gcd(a: int, b: int) -> int:", "Return the greatest common divisor of two non-negative integers (gcd(0, 0) = 0).",
      "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
      lambda r, d: [r.randint(0 if d else 1, 10 ** (d + 2)), r.randint(0 if d else 1, 10 ** (d + 2))]),
    P("count_words", "def count_words(s: str) -> int:", "Return the number of whitespace-separated words in s.",
      "def count_words(s):\n    return len(s.split())",
      lambda r, d: ["  ".join(_sentence(r, d).split(" ")) if d >= 2 else _sentence(r, d)]),
    P("capitalize_words", "def capitalize_words(s: str) -> str:",
      "Return s with the first letter of every space-separated word in uppercase (words separated by single spaces).",
      "def capitalize_words(s):\n    return ' '.join(w[:1].upper() + w[1:] for w in s.split(' '))", lambda r, d: [_sentence(r, d)]),
    P("remove_duplicates", "def remove_duplicates(xs: list[int]) -> list[int]:", "Return xs without repeated values, keeping first occurrences in order.",
      "def remove_duplicates(xs):\n    seen, out = set(), []\n    for x in xs:\n        if x not in seen:\n            seen.add(x)\n"
      "            out.append(x)\n    return out", lambda r, d: [_ints(r, d, -5, 5)]),
    P("second_largest", "def second_largest(xs: list[int]) -> int | None:",
      "Return the second largest distinct value in xs, or None if there are fewer than two distinct values.",
      "def second_largest(xs):\n    v = sorted(set(xs))\n    return v[-2] if len(v) >= 2 else None",
      lambda r, d: [_ints(r, d, -9, 9) if d else _ints(r, d, 0, 50, n=r.randint(2, 6))]),
    P("flatten", "def flatten(xss: list[list[int]]) -> list[int]:", "Concatenate the inner lists in order.",
      "def flatten(xss):\n    return [x for xs in xss for x in xs]",
      lambda r, d: [[_ints(r, d, n=r.randint(0 if d else 1, 3)) for _ in range(r.randint(0 if d else 1, (3, 4, 6, 9)[d]))]]),
    P("running_sum", "def running_sum(xs: list[int]) -> list[int]:", "Return the list of prefix sums of xs.",
      "def running_sum(xs):\n    out, t = [], 0\n    for x in xs:\n        t += x\n        out.append(t)\n    return out",
      lambda r, d: [_ints(r, d)]),
    P("char_frequency", "def char_frequency(s: str) -> dict[str, int]:", "Return a dict mapping each character of s to its count.",
      "def char_frequency(s):\n    out = {}\n    for c in s:\n        out[c] = out.get(c, 0) + 1\n    return out",
      lambda r, d: [_word(r, r.randint(0 if d else 1, (5, 10, 20, 40)[d]))]),
    P("binary_string", "def binary_string(n: int) -> str:", "Return the binary representation of n >= 0 without prefix ('0' for 0).",
      "def binary_string(n):\n    return format(n, 'b')", lambda r, d: [r.randint(0 if d else 1, 2 ** (4 * (d + 1)))]),
    P("digit_sum", "def digit_sum(n: int) -> int:", "Return the sum of the decimal digits of n (ignore the sign).",
      "def digit_sum(n):\n    return sum(int(c) for c in str(abs(n)))", lambda r, d: [r.randint(-10 ** (2 * d + 2) if d else 0, 10 ** (2 * d + 2))]),
    P("merge_sorted", "def merge_sorted(a: list[int], b: list[int]) -> list[int]:", "Merge two sorted lists into one sorted list.",
      "def merge_sorted(a, b):\n    return sorted(a + b)", lambda r, d: [sorted(_ints(r, d)), sorted(_ints(r, d))]),
    P("rotate_list", "def rotate_list(xs: list[int], k: int) -> list[int]:",
      "Rotate xs right by k steps (k >= 0, may exceed len(xs)); an empty list stays empty.",
      "def rotate_list(xs, k):\n    if not xs:\n        return []\n    k %= len(xs)\n    return xs[-k:] + xs[:-k] if k else list(xs)",
      lambda r, d: [_ints(r, d, n=r.randint(0 if d else 1, 8)), r.randint(0, (3, 10, 30, 100)[d])]),
    P("chunk", "def chunk(xs: list[int], size: int) -> list[list[int]]:", "Split xs into consecutive chunks of length size (the last may be shorter).",
      "def chunk(xs, size):\n    return [xs[i:i + size] for i in range(0, len(xs), size)]",
      lambda r, d: [_ints(r, d), r.randint(1, 4)]),
    P("caesar", "def caesar(s: str, k: int) -> str:", "Shift each lowercase letter of s forward by k positions in the alphabet (wrapping); keep other characters.",
      "def caesar(s, k):\n    return ''.join(chr((ord(c) - 97 + k) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)",
      lambda r, d: [_sentence(r, d), r.randint(0, (5, 25, 60, 1000)[d])]),
    P("run_length", "def run_length(s: str) -> str:", "Run-length encode s: 'aaabcc' -> 'a3b1c2'.",
      "def run_length(s):\n    out, i = [], 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n"
      "            j += 1\n        out.append(s[i] + str(j - i))\n        i = j\n    return ''.join(out)",
      lambda r, d: ["".join(r.choice("ab") * r.randint(1, 4) for _ in range(r.randint(0 if d else 1, (3, 5, 8, 15)[d])))]),
    P("longest_word", "def longest_word(s: str) -> str:", "Return the first longest space-separated word of s ('' if there is none).",
      "def longest_word(s):\n    best = ''\n    for w in s.split():\n        if len(w) > len(best):\n            best = w\n    return best",
      lambda r, d: [_sentence(r, d)]),
    P("are_anagrams", "def are_anagrams(a: str, b: str) -> bool:", "Return True if a and b contain the same letters with the same counts.",
      "def are_anagrams(a, b):\n    return sorted(a) == sorted(b)",
      lambda r, d: (lambda w: [w, "".join(r.sample(w, len(w))) if r.random() < 0.5 else _word(r, len(w))])(_word(r))),
    P("transpose", "def transpose(m: list[list[int]]) -> list[list[int]]:", "Return the transpose of a rectangular matrix (non-empty rows).",
      "def transpose(m):\n    return [list(col) for col in zip(*m)]",
      lambda r, d: (lambda rows, cols: [[[r.randint(-9, 9) for _ in range(cols)] for _ in range(rows)]])(r.randint(1, 3 + d), r.randint(1, 3 + d))),
    P("count_greater", "def count_greater(xs: list[int], t: int) -> int:", "Return how many elements of xs are strictly greater than t.",
      "def count_greater(xs, t):\n    return sum(x > t for x in xs)", lambda r, d: [_ints(r, d), r.randint(-20, 40)]),
    P("median", "def median(xs: list[int]) -> float:", "Return the median of the non-empty list xs as a float (mean of the two middle values for even length).",
      "def median(xs):\n    v = sorted(xs)\n    n = len(v)\n    return float(v[n // 2]) if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2",
      lambda r, d: [_ints(r, d, n=r.randint(1, (5, 8, 12, 30)[d]))]),
    P("mode", "def mode(xs: list[int]) -> int:", "Return the most frequent value of the non-empty list xs (the smallest one on ties).",
      "def mode(xs):\n    best = min(xs, key=lambda x: (-xs.count(x), x))\n    return best",
      lambda r, d: [_ints(r, d, -4, 4, n=r.randint(1, (5, 8, 12, 30)[d]))]),
    P("balanced", "def balanced(s: str) -> bool:", "Return True if the brackets ()[]{} in s are balanced and properly nested.",
      "def balanced(s):\n    pairs, stack = {')': '(', ']': '[', '}': '{'}, []\n    for c in s:\n        if c in '([{':\n"
      "            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n"
      "                return False\n    return not stack",
      lambda r, d: ["".join(r.choice("()[]{}" if d else "()") for _ in range(r.randint(0 if d else 1, (4, 6, 10, 20)[d])))]),
    P("to_roman", "def to_roman(n: int) -> str:", "Return n (1..3999) in Roman numerals.",
      "def to_roman(n):\n    vals = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'),\n"
      "            (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for v, s in vals:\n"
      "        while n >= v:\n            out += s\n            n -= v\n    return out", lambda r, d: [r.randint(1, (20, 400, 3999, 3999)[d])]),
    P("snake_to_camel", "def snake_to_camel(s: str) -> str:", "Convert snake_case to camelCase: 'make_it_work' -> 'makeItWork'.",
      "def snake_to_camel(s):\n    parts = s.split('_')\n    return parts[0] + ''.join(p[:1].upper() + p[1:] for p in parts[1:])",
      lambda r, d: ["_".join(_word(r) for _ in range(r.randint(1, 2 + d)))]),
    P("pair_count", "def pair_count(xs: list[int], target: int) -> int:", "Return the number of index pairs i < j with xs[i] + xs[j] == target.",
      "def pair_count(xs, target):\n    n = len(xs)\n    return sum(xs[i] + xs[j] == target for i in range(n) for j in range(i + 1, n))",
      lambda r, d: [_ints(r, d, -5, 5), r.randint(-4, 6)]),
    P("common_sorted", "def common_sorted(a: list[int], b: list[int]) -> list[int]:", "Return the sorted distinct values present in both a and b.",
      "def common_sorted(a, b):\n    return sorted(set(a) & set(b))", lambda r, d: [_ints(r, d, -6, 6), _ints(r, d, -6, 6)]),
    P("word_lengths", "def word_lengths(s: str) -> list[int]:", "Return the lengths of the whitespace-separated words of s, in order.",
      "def word_lengths(s):\n    return [len(w) for w in s.split()]", lambda r, d: [_sentence(r, d)]),
    P("clamp", "def clamp(x: int, lo: int, hi: int) -> int:", "Return x limited to the range [lo, hi] (lo <= hi).",
      "def clamp(x, lo, hi):\n    return max(lo, min(hi, x))",
      lambda r, d: (lambda lo: [r.randint(-30, 30), lo, lo + r.randint(0, 20)])(r.randint(-20, 10))),
    P("is_sorted", "def is_sorted(xs: list[int]) -> bool:", "Return True if xs is in non-decreasing order.",
      "def is_sorted(xs):\n    return all(a <= b for a, b in zip(xs, xs[1:]))",
      lambda r, d: [sorted(_ints(r, d)) if r.random() < 0.5 else _ints(r, d)]),
    P("vowel_words", "def vowel_words(s: str) -> list[str]:", "Return the space-separated words of s that start with a vowel (aeiou), in order.",
      "def vowel_words(s):\n    return [w for w in s.split() if w[0] in 'aeiou']", lambda r, d: [_sentence(r, d)]),
]
BY_NAME = {p.name: p for p in PROBLEMS}
assert all(p.ref.rstrip().split("\n")[-1].startswith("    return ") for p in PROBLEMS)
