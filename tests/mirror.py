"""Tests that read the real benchmark files skip, saying why, where the data mirror is absent (a
fresh clone has none); CI has it and runs them."""
import pytest

from robustkit.data.benchmarks import data_dir


def needs_mirror(*folders: str):
    """Skip unless the mirror (``$ROBUSTKIT_DATA_DIR``, else ``../shared/datasets``) holds ``folders``."""
    root = data_dir()
    missing = [f for f in folders if root is None or not (root / f).is_dir()]
    return pytest.mark.skipif(bool(missing), reason=f"no data mirror with {', '.join(missing)} "
                                                    "(../shared/datasets or $ROBUSTKIT_DATA_DIR)")
