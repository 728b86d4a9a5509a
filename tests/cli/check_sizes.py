#!/usr/bin/env python3
"""check_sizes.py CKPLAN CHAIN: --budget against exact rational arithmetic.

For every unit, in several spellings, and a family of decimals (fixed cases, the values
nearest 2^53, seeded random ones), works out with fractions.Fraction what the size is, and
checks that `ckplan plan CHAIN --budget SIZE` accepts it with exactly that many bytes when
it is a whole number below 2^53, and otherwise refuses it (exit 2) for the right reason.
Prints every disagreement; exits 1 if there is any.
"""
import random
import re
import subprocess
import sys
from fractions import Fraction

LIMIT = 2**53
UNITS = {"": 1, "b": 1, "B": 1}
for power, letter in enumerate("KMGT", start=1):
    UNITS[letter] = UNITS[letter.lower() + "ib"] = 1024**power
    UNITS[letter + "B"] = 1000**power

FIXED = ["0", "7", "1.0", "1.", ".5", "2.50", "0.3", "1.5", "0.125", "0.001", "0.0009765625",
         "00012", "0.000000000000909494701772928237915039062500", "1.0000000000000000000000000001",
         "0." + "0" * 60 + "1"]


def decimal(value):
    """The exact decimal text of a fraction whose denominator is 2^a 5^b."""
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    assert den == 1
    places = max(twos, fives)
    digits = str(value.numerator * 10**places // value.denominator).rjust(places + 1, "0")
    return digits if places == 0 else digits[:-places] + "." + digits[-places:]


def mantissas(unit, rng):
    yield from FIXED
    for bytes_ in (LIMIT - 1, LIMIT, 2**64):
        yield decimal(Fraction(bytes_, unit))
    yield str((LIMIT - 1) // unit)
    yield str((LIMIT - 1) // unit + 1)
    for _ in range(4):
        whole = str(rng.randrange(10 ** rng.randrange(1, 8)))
        places = rng.randrange(0, 14)
        yield whole + ("." + "".join(rng.choice("0123456789") for _ in range(places)) if places else "")


def check(ckplan, chain, mantissa, suffix, unit):
    text = mantissa + suffix
    value = Fraction(mantissa.rstrip(".")) * unit
    proc = subprocess.run([ckplan, "plan", chain, "--budget", text, "-o", "sizes.plan.json"],
                          capture_output=True, text=True)
    said = proc.stdout + proc.stderr
    if value.denominator == 1 and value < LIMIT:
        got = re.search(r"budget [^(]*\((\d+) bytes\)", said)
        if proc.returncode not in (0, 3) or not got or int(got.group(1)) != value:
            return f"{text}: expected {value} bytes, got exit {proc.returncode}: {said[:300]}"
        return None
    whys = ["not a whole number of bytes"] if value.denominator != 1 else []
    whys += ["below 2^53 bytes (8 PiB)"] if value >= LIMIT else []
    why = " or ".join(whys)
    if proc.returncode != 2 or f"invalid size '{text}'" not in said or not any(w in said for w in whys):
        return f"{text}: expected refusal ({why}), got exit {proc.returncode}: {said[:300]}"
    return None


def main():
    ckplan, chain = sys.argv[1], sys.argv[2]
    rng = random.Random(12)
    failures, cases = [], 0
    for suffix, unit in UNITS.items():
        for m in mantissas(unit, rng):
            cases += 1
            problem = check(ckplan, chain, m, suffix, unit)
            if problem:
                failures.append(problem)
    for f in failures:
        print(f)
    print(f"{cases} sizes, {len(failures)} wrong", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
