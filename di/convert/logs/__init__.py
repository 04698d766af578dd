"""Text logs of a job (NCCL debug output, training logs, nvidia-smi) as traces.

One module per log family (:mod:`.nccl`, :mod:`.nccltests`, :mod:`.training`, :mod:`.smi`, :mod:`.slurm`,
:mod:`.darshan_text`; Slurm's JSON documents in :mod:`.slurm_json`) over one reading layer (:mod:`.text`: gzip, ANSI colours, launcher rank prefixes, garbled
lines counted) and one trace builder (:mod:`.build`). :mod:`.reader` sniffs the
families a file holds and runs each of them over it, so a Slurm ``.out`` that
holds both NCCL INFO lines and Megatron iteration lines yields both.
"""
