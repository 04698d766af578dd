"""Check an installed cupti-python against what di reads from it, without a GPU.

Run it with the interpreter of an environment holding the cupti-python to check
(``PYTHONPATH=REPO:REPO/tests python bench/cupti_bindings.py``): it lists the
functions, enum values and record classes di uses, builds the fixture records of
tests/cupti_fixture.py as that release's own classes over C structs in memory (as
its buffer callback wraps CUPTI's buffer), converts them with
:func:`di.capture.cupti_records.to_records` and compares the result with the same
records given as plain objects with the documented member names. It also calls
``activity_enable`` to show what this machine's CUPTI says (no driver: an error).
Writes bench/out/cupti_bindings-VERSION.json and exits 1 when anything differs.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
from cupti import cupti
from cupti_fixture import API, KINDS, activity, delivered_class, make_plain, make_real

from di.capture import cupti_records as records

FUNCTIONS = (
    "activity_register_callbacks",
    "activity_enable",
    "activity_disable",
    "activity_flush_all",
    "get_callback_name",
    "set_thread_id_type",
    "get_timestamp",
    "finalize",
)


def convert(make: object) -> tuple[np.ndarray, dict[str, int]]:
    names: dict[str, int] = {}
    out = records.to_records(
        activity(make),
        lambda k: KINDS.get(k, 0),
        lambda n: names.setdefault(n, len(names) + 1),
        lambda _k, cbid: API[cbid],
    )
    return out, names


def main() -> int:
    version = metadata.version("cupti-python")
    report: dict = {
        "cupti_python": version,
        "functions_missing": [f for f in FUNCTIONS if not hasattr(cupti, f)],
        "kinds": {k: int(getattr(cupti.ActivityKind, k)) for k in records.CUPTI_KINDS},
        "classes": sorted({delivered_class(k).__name__ for k in KINDS}),
        "thread_id_type_system": int(cupti.ActivityThreadIdType.SYSTEM),
        "multiple_subscribers": int(cupti.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
    }
    (plain, plain_names), (real, real_names) = convert(make_plain), convert(make_real)
    report["records"] = int(plain.size)
    report["differing_columns"] = [f for f in plain.dtype.names if not np.array_equal(plain[f], real[f])]
    report["same_names"] = plain_names == real_names
    unsupported = []
    for name in records.CUPTI_KINDS:
        try:
            cupti.activity_enable(getattr(cupti.ActivityKind, name))
            report["enable"] = "no error"
        except NotImplementedError:
            unsupported.append(name)
        except Exception as exc:  # what this machine's CUPTI says (no driver: NotSupportedError)
            report["enable"] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    report["kinds_not_in_binding"] = unsupported
    ok = not report["functions_missing"] and not report["differing_columns"] and report["same_names"]
    report["ok"] = ok
    out = Path(__file__).resolve().parent / "out" / f"cupti_bindings-{version}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
