"""A shorter numba compile pipeline for di's scalar kernels (issue 15: the first run's compile).

numba compiles every ``@njit`` function through its default pipeline of about 27
passes. Several of them serve Python features that di's kernels do not use
(closures and ``with`` contexts, ``literal_unroll``, ``literally``, dead
branches on constant conditions, array expressions to fuse), and most of those
re-run numba's IR post-processing (liveness over every block) whether or not
they change anything: on a cold ``di convert X.json.gz -o x.otf2`` the
post-processing alone was 1.2 of 9.3 CPU-s of compiling.

:class:`ScalarKernelCompiler` is numba's own nopython pipeline
(``DefaultPassBuilder.define_nopython_pipeline``) less :data:`SKIPPED`, given to
a kernel as ``@njit(..., pipeline_class=ScalarKernelCompiler)`` (numba's
documented way to customise its pipeline). What a kernel may then not use:

- closures, inner functions and comprehensions (``InlineClosureLikes``,
  ``MakeFunctionToJitFunction``), ``with`` blocks (``WithLifting``),
  ``literal_unroll`` and ``literally``;
- whole-array expressions (``a + b`` on arrays: ``NopythonRewrites`` fuses them
  into one loop; without it each operator allocates its result);
- a constant index into a tuple written ``t[0]`` on a call's result still
  works, but without the after-typing rewrite numba lowers it as a switch over
  the tuple that LLVM must fold away (more to compile); unpack it instead
  (``a, _ = f()``).

A kernel that uses one of these fails to compile (a typing error) or compiles
slower code; ``tests/test_jitpipeline.py`` checks that the kernels given this
pipeline on ``di convert``'s paths compile to the same optimised LLVM as with
numba's default one.

IRLegalization is replaced by :class:`LegalizeWithoutDels` in kernels compiled
without numba's runtime (``_nrt=False``): numba's lowering turns each ``del``
into a load and a null store of the variable (for the reference count it would
drop), which LLVM then deletes again; with no reference counts there is nothing
to drop.

Measured (in one process, fresh compiles of the kernels of ``di convert X.json.gz
-o x.otf2`` and ``-o x.pftrace``, alternating, best of three): 11.9 -> 10.0 CPU-s.
"""

from __future__ import annotations

from numba.core import postproc
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import AnalysisPass, PassManager, register_pass
from numba.core.ir_utils import enforce_no_dels, enforce_no_phis
from numba.core.typed_passes import IRLegalization

SKIPPED = frozenset(
    {
        "WithLifting",
        "InlineClosureLikes",
        "RewriteSemanticConstants",
        "DeadBranchPrune",
        "MakeFunctionToJitFunction",
        "FindLiterallyCalls",
        "LiteralUnroll",
        "NopythonRewrites",
        "DumpParforDiagnostics",
    }
)
"""Names of the passes of numba's nopython pipeline that :class:`ScalarKernelCompiler` leaves out."""


@register_pass(mutates_CFG=False, analysis_only=True)
class LegalizeWithoutDels(AnalysisPass):
    """numba's ``IRLegalization`` less the ``del`` statements it inserts after each variable's last use."""

    _name = "di_legalize_without_dels"

    def __init__(self) -> None:
        AnalysisPass.__init__(self)

    def run_pass(self, state) -> bool:  # type: ignore[no-untyped-def]
        enforce_no_phis(state.func_ir)
        enforce_no_dels(state.func_ir)
        postproc.PostProcessor(state.func_ir).run(emit_dels=False)
        return True


class ScalarKernelCompiler(CompilerBase):
    """numba's nopython pipeline less the passes named in :data:`SKIPPED`."""

    def define_pipelines(self) -> list[PassManager]:
        full = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm = PassManager("di_scalar_kernel")
        for pass_class, description in full.passes:
            if pass_class is IRLegalization and not self.state.flags.nrt:
                pm.add_pass(LegalizeWithoutDels, description)
            elif pass_class.__name__ not in SKIPPED:
                pm.add_pass(pass_class, description)
        pm.finalize()
        return [pm]
