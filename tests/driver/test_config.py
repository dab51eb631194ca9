"""ReplayConfig checks itself: errors name the field."""

import pytest

from harness.driver.config import ReplayConfig
from harness.errors import InputError


def test_a_missing_tokenizer_file_names_the_field(tmp_path):
    with pytest.raises(InputError, match="field 'tokenizer': no such file"):
        ReplayConfig(tokenizer=str(tmp_path / "nope.json"))


def test_open_loop_needs_a_rate():
    with pytest.raises(InputError, match="field 'session_rate'"):
        ReplayConfig(load="open")
