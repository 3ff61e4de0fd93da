import pytest

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [("4K", 4096), ("4k", 4096), ("4KB", 4096), ("4KiB", 4096), ("1M", 1 << 20), ("1MiB", 1 << 20),
     ("2G", 2 << 30), ("1.5M", 3 << 19), ("512", 512), ("512B", 512), ("1T", 1 << 40)],
)
def test_sizes_are_binary_like_fio(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("500ms", 500_000_000), ("10s", 10_000_000_000), ("10", 10_000_000_000), ("250us", 250_000),
     ("2m", 120_000_000_000), ("1h", 3_600_000_000_000), ("100ns", 100), ("1.5s", 1_500_000_000)],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["4X", "abc", "", "-4K", "1.3B"])
def test_bad_sizes_name_the_parameter(text):
    with pytest.raises(UsageError, match=r"^--bs "):
        parse_size(text, "--bs")


def test_bad_duration_names_the_parameter():
    with pytest.raises(UsageError, match=r"^--runtime '5 parsecs'"):
        parse_duration("5 parsecs", "--runtime")


def test_formatting_uses_binary_units():
    assert format_size(4096) == "4 KiB"
    assert format_size(1536 * 1024 * 1024) == "1.50 GiB"
    assert format_size(100) == "100 B"
    assert format_duration(1_200_000) == "1.20 ms"
    assert format_duration(5_000_000_000) == "5 s"
    assert format_duration(812) == "812 ns"
