import json
from pathlib import Path

DATA = Path(__file__).parent / "data.json"


def test_data_file_is_valid():
    assert json.loads(DATA.read_text())["version"] >= 1
