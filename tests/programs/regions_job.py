"""A small Python job for tests/test_capture_nvtx.py: di.region (context manager, decorator,
nesting, a second thread), the program's own functions (one long, one short, one raising)
and library calls (json), and NVTX through the `nvtx` package when argv[1] == "nvtx"."""

import json
import sys
import threading
import time

import di


def slow_helper() -> None:
    time.sleep(0.004)


def quick_helper() -> int:
    return 1


def failing() -> None:
    time.sleep(0.003)
    raise ValueError("expected")


@di.region("checkpoint")
def checkpoint() -> None:
    json.dumps({"k": list(range(100))})
    time.sleep(0.002)


def worker() -> None:
    with di.region("loader"):
        time.sleep(0.002)


def main() -> None:
    for step in range(2):
        with di.region(f"step {step}"):
            with di.region("forward"):
                slow_helper()
                for _ in range(100):
                    quick_helper()
            with di.region("backward"):
                time.sleep(0.002)
            checkpoint()
    try:
        failing()
    except ValueError:
        pass
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    if sys.argv[1:] == ["nvtx"]:
        import nvtx

        with nvtx.annotate("nvtx outer", color="blue", domain="pkg"):
            nvtx.push_range("nvtx inner", color="red", domain="pkg", category="io")
            time.sleep(0.001)
            nvtx.pop_range(domain="pkg")
        nvtx.mark("nvtx mark")


if __name__ == "__main__":
    main()
