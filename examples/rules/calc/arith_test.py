import json
import unittest
from pathlib import Path

from calc import arith

CASES = json.loads(Path("calc/testdata/cases.json").read_text())


class ArithTest(unittest.TestCase):
    def test_cases(self):
        for a, b, total in CASES:
            self.assertEqual(arith.add(a, b), total)

    def test_mul(self):
        self.assertEqual(arith.mul(3, 4), 12)


if __name__ == "__main__":
    unittest.main()
