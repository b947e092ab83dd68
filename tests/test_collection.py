"""Collection is free: no TensorFlow, no device probe; devices are found at the first setup that
needs one, and a project's own ``accelerator`` fixture is left alone."""

from __future__ import annotations

import pytest

MIXED = """
import sys

def test_plain_one():
    pass

def test_plain_two():
    pass

def test_on_device(accelerator):
    pass

def test_tensorflow_not_imported_by_collection():
    assert "tensorflow" not in sys.modules
"""

REPORT_TF = """
import sys

def pytest_unconfigure(config):
    print("tensorflow imported:", "tensorflow" in sys.modules)
"""


@pytest.fixture
def mixed(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_mixed=MIXED)
    pytester.makeconftest(REPORT_TF)
    return pytester


@pytest.mark.parametrize("args", [["-k", "plain"], ["--collect-only"], ["-k", "not_imported"]])
def test_collection_and_plain_tests_import_no_tensorflow(mixed: pytest.Pytester, args):
    result = mixed.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*tensorflow imported: False*"])


def test_collect_only_lists_the_kinds_accelerator_names(mixed: pytest.Pytester):
    result = mixed.runpytest_subprocess("--collect-only", "-q", "--accelerator=cpu,tpu")
    result.stdout.fnmatch_lines(["*test_on_device[[]cpu]", "*test_on_device[[]tpu]"])
    result.stdout.no_fnmatch_line("*test_on_device[[]gpu]*")


def test_missing_device_skips_at_setup_with_the_reason(mixed: pytest.Pytester):
    result = mixed.runpytest_subprocess("--accelerator=all", "-rs", "-k", "device")
    result.assert_outcomes(passed=1, skipped=2, deselected=3)
    result.stdout.fnmatch_lines(["*SKIPPED*test_mixed.py:*no TPU: *"])


def test_a_missing_device_named_explicitly_is_a_usage_error(mixed: pytest.Pytester):
    result = mixed.runpytest_subprocess("--accelerator=tpu", "-k", "device")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --accelerator asked for devices that are not present: tpu*"]
    )


def test_without_tensorflow_the_file_collects_and_device_tests_skip(mixed: pytest.Pytester):
    # runpytest_subprocess puts the test directory first on PYTHONPATH: this module shadows
    # TensorFlow as if it were not installed (allowed: the plugin has no TensorFlow extra).
    mixed.makepyfile(tensorflow="raise ImportError('No module named tensorflow (test)')")
    result = mixed.runpytest_subprocess("-rs", "-p", "no:cacheprovider", "--accelerator=all")
    result.assert_outcomes(passed=3, skipped=3)
    result.stdout.fnmatch_lines(["*SKIPPED*TensorFlow is not installed*"])


def test_a_projects_own_accelerator_fixture_is_not_parametrized(pytester: pytest.Pytester):
    pytester.makeconftest(
        REPORT_TF
        + """
import pytest

@pytest.fixture
def accelerator():
    return "the project's own"
"""
    )
    pytester.makepyfile(
        """
        def test_own(accelerator):
            assert accelerator == "the project's own"
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_own PASSED*", "*tensorflow imported: False*"])


def test_an_override_built_on_the_plugins_fixture_stays_parametrized(pytester: pytest.Pytester):
    pytester.makeconftest(
        """
import pytest

@pytest.fixture
def accelerator(accelerator):
    return accelerator.kind
"""
    )
    pytester.makepyfile("def test_wrapped(accelerator):\n    assert accelerator == 'cpu'\n")
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--accelerator=cpu")
    result.stdout.fnmatch_lines(["*test_wrapped[[]cpu]*"])
