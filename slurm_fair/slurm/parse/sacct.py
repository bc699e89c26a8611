"""``sacct -X -o``: the columns asked for and records -> :class:`~slurm_fair.model.AccountingRecord`."""

from __future__ import annotations

from ..model import AccountingRecord
from .fields import parse_int, parse_time
from .gres import gpus_in_tres_map, parse_tres_map
from .records import split_records

#: sacct -X -o fields (JobName and Comment, user text, last)
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "Account",
    "User",
    "State",
    "Partition",
    "AllocTRES",
    "ElapsedRaw",
    "Submit",
    "Start",
    "End",
    "NNodes",
    "JobName",
    "Comment",
)


def parse_sacct(text: str, fs: str) -> list[AccountingRecord]:
    out = []
    for f in split_records(text, fs, len(SACCT_FIELDS)):
        job_id, account, user, state, partition, alloc, elapsed, submit, start, end, nnodes, name, comment = f
        gpus, gpu_type = gpus_in_tres_map(parse_tres_map(alloc))
        out.append(
            AccountingRecord(
                job_id=job_id.strip(),
                account=account.strip(),
                user=user.strip(),
                state=state.strip().split(" ")[0],
                gpu_type=gpu_type,
                gpus=gpus,
                submit_time=parse_time(submit),
                start_time=parse_time(start),
                end_time=parse_time(end),
                elapsed_s=float(parse_int(elapsed)),
                partition=partition.strip(),
                name=name,
                comment=comment,
                nodes=max(1, parse_int(nnodes, 1)),
            )
        )
    return out
