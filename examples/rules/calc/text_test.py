import os
import unittest

from calc import text


class TextTest(unittest.TestCase):
    def test_shout(self):
        self.assertEqual(os.environ["CALC_LOCALE"], "C")
        self.assertEqual(text.shout("hi"), "HI!")


if __name__ == "__main__":
    unittest.main()
