"""Read a TensorBoard run directory with TensorBoard's own EventAccumulator and
print what it holds as JSON: every scalar as [step, value, wall_time] and every
text as [step, text], by tag. The trackers tests compare it with what they wrote."""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "tensors": 0})
acc.Reload()
tags = acc.Tags()
out = {"scalars": {}, "texts": {}}
for tag in tags["scalars"]:
    out["scalars"][tag] = [[e.step, e.value, e.wall_time] for e in acc.Scalars(tag)]
for tag in tags["tensors"]:
    out["texts"][tag] = [
        [e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()] for e in acc.Tensors(tag)
    ]
json.dump(out, sys.stdout)
