"""The decode stage outside the workers (issue 7), on its CPU device: same samples as the
in-worker path, members deduplicated per batch, clear errors for what NVDEC cannot do."""

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.decode import ENCODED_KEY, DecodeStage, DecodeStageError, collate
from lerobot_shards.reader.decode.backends import NvdecBackend
from tests.packed_fixtures import *

DELTA = {"observation.images.top": [-1 / 30, 0.0, 1 / 30], "action": [0.0, 1 / 30]}


@pytest.mark.parametrize("uint8", [False, True])
def test_cpu_stage_equals_in_worker_decode(packed_copy, uint8):
    reference = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=1, return_uint8=uint8)
    staged = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=1, return_uint8=uint8, decode_device="cpu")
    expected = list(torch.utils.data.DataLoader(reference, batch_size=8, num_workers=2))
    loader = torch.utils.data.DataLoader(staged, batch_size=8, num_workers=2, collate_fn=collate)
    stage = DecodeStage("cpu")
    got = []
    for batch in loader:
        assert ENCODED_KEY in batch and "observation.images.top" not in batch
        members = batch[ENCODED_KEY]["observation.images.wrist"]["members"]
        assert len(members) <= 8
        got.append(stage(batch))
    assert len(got) == len(expected)
    for a, b in zip(expected, got):
        assert set(a) == set(b)
        for key in a:
            if isinstance(a[key], torch.Tensor):
                assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
    assert stage.stats()["decoder_hits"] > 0


def test_nvdec_limits_are_explained(packed_copy, packed_hevc_nvdec):
    if not torch.cuda.is_available():
        with pytest.raises(DecodeStageError, match="no CUDA device"):
            DecodeStage("cuda")
    # AV1 (copy mode) never goes to NVDEC: refused when the dataset is made, not at a batch.
    with pytest.raises(ArgumentError, match="holds av1"):
        PackedDataset(str(packed_copy), decode_device="cuda", shuffle=False)
    stage = DecodeStage("cuda", allow_cpu_fallback=True)
    dataset = PackedDataset(str(packed_hevc_nvdec), decode_device="cuda", shuffle=False)
    batch = stage(collate([next(iter(dataset))]))
    assert batch["observation.images.top"].shape == (1, 3, 144, 192)
    on_nvdec = torch.cuda.is_available() and NvdecBackend.unavailable() is None
    assert (stage.stats()["cpu_fallbacks"] == 0) if on_nvdec else (stage.stats()["cpu_fallbacks"] >= 1)
    with pytest.raises(ValueError, match="apply them after DecodeStage"):
        PackedDataset(str(packed_copy), decode_device="cpu", image_transforms=lambda x: x)


def test_wrap_overlaps_decoding_and_keeps_order(packed_copy):
    staged = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=1, decode_device="cpu")
    reference = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=1)
    loader = torch.utils.data.DataLoader(staged, batch_size=8, num_workers=2, collate_fn=collate)
    wrapped = list(DecodeStage("cpu").wrap(loader, ahead=2))
    expected = list(torch.utils.data.DataLoader(reference, batch_size=8, num_workers=2))
    assert [b["index"].tolist() for b in wrapped] == [b["index"].tolist() for b in expected]
    assert all(torch.equal(a["observation.images.top"], b["observation.images.top"]) for a, b in zip(wrapped, expected))

    def broken():
        yield collate([next(iter(staged))])
        raise RuntimeError("loader exploded")

    with pytest.raises(RuntimeError, match="loader exploded"):
        list(DecodeStage("cpu").wrap(broken()))


def _encoded_batches(root, delta=DELTA, batch_size=8):
    staged = PackedDataset(str(root), delta_timestamps=delta, seed=3, return_uint8=True, decode_device="cpu")
    return list(torch.utils.data.DataLoader(staged, batch_size=batch_size, num_workers=0, collate_fn=collate))


@pytest.mark.parametrize("fixture", ["packed_hevc", "packed_copy"])
def test_threads_change_nothing_and_each_member_opens_once(fixture, request):
    """The stage decodes each member of a batch once for all its samples' frames, members in
    a thread pool: 1 and 3 threads give the same tensors as the in-worker path."""
    root = request.getfixturevalue(fixture)
    reference = PackedDataset(str(root), delta_timestamps=DELTA, seed=3, return_uint8=True)
    expected = list(torch.utils.data.DataLoader(reference, batch_size=8, num_workers=0))
    results = {}
    for threads in (1, 3):
        stage = DecodeStage("cpu", threads=threads, cache_size=1000)
        batches = [stage(batch) for batch in _encoded_batches(root)]
        members = {
            m.member_id for batch in _encoded_batches(root) for payload in batch[ENCODED_KEY].values() for m in payload["members"]
        }
        assert stage.stats()["decoder_misses"] == len(members)
        results[threads] = batches
        stage.close()
    for one, three, want in zip(results[1], results[3], expected):
        for key in DELTA:
            if key.startswith("observation.images"):
                assert torch.equal(one[key], want[key]) and torch.equal(three[key], want[key]), key


def test_bad_batches_are_refused_before_decoding(packed_hevc):
    batch = _encoded_batches(packed_hevc)[0]
    stage = DecodeStage("cpu")
    payload = batch[ENCODED_KEY]["observation.images.top"]
    member = payload["members"][0]
    beyond = dict(batch, **{ENCODED_KEY: {"observation.images.top": {"members": [member], "refs": [(0, (0, member.frames))]}}})
    with pytest.raises(DecodeStageError, match=rf"frames \[{member.frames}\] are outside its {member.frames} frames"):
        stage(beyond)
    mixed = dict(batch, **{ENCODED_KEY: {"observation.images.top": {"members": [member], "refs": [(0, (0, 1)), (0, (0, 1, 2))]}}})
    with pytest.raises(DecodeStageError, match=r"windows of \[2, 3\] frames"):
        stage(mixed)
    assert stage.stats()["frames_decoded"] == 0 and stage.stats()["decoder_misses"] == 0


def test_backends_and_devices_are_checked():
    from lerobot_shards.reader.decode.backends import nvdec_unavailable

    with pytest.raises(
        ValueError, match="backend 'nvdec' decodes on a CUDA device, not the CPU; on the CPU use 'pyav' or 'torchcodec'"
    ):
        DecodeStage("cpu", backend="nvdec")
    with pytest.raises(ValueError, match="backend 'ffmpeg' is not one of 'auto', 'nvdec', 'pyav', 'torchcodec'"):
        DecodeStage("cpu", backend="ffmpeg")
    with pytest.raises(
        ValueError, match="decodes on the CPU, not a CUDA device; on a CUDA device use 'nvdec' or 'torchcodec', or device='cpu'"
    ):
        DecodeStage("cuda", backend="pyav")
    with pytest.raises(ValueError, match="backend 'pyav' takes no options"):
        DecodeStage("cpu", backend="pyav", backend_options={"colour": "exact"})
    if not torch.cuda.is_available():
        assert "no CUDA device" in nvdec_unavailable()
        stage = DecodeStage("cuda", allow_cpu_fallback=True)
        assert stage.backend == "cpu" and "no CUDA device" in stage.unavailable
        with pytest.raises(DecodeStageError, match="NVDEC cannot decode here: torch sees no CUDA device"):
            DecodeStage("cuda", backend="nvdec")


def test_each_member_opens_at_most_once_per_admission_on_a_mixture(tmp_path):
    """A 64-member LRU thrashed on a mixture (3,727 opens in 60 batches, issue 29): members
    are now held from an admission's first draw to its last. 220 members in 4 packs, a pool
    of 40 x 2 workers (80 live): every member opens at most once per admission, its bytes
    cross the process boundary once per admission, nothing stays held after the epoch, and
    the frames equal the in-worker path's."""
    from lerobot_shards import MixtureDataset
    from lerobot_shards.testing import tiny_member, write_tabular_pack

    camera = "observation.images.top"
    member = tiny_member(6)
    roots = []
    for seed in range(4):
        root = tmp_path / f"pack{seed}"
        write_tabular_pack(root, episodes=55, length=6, seed=seed + 1, camera=(camera, member, 16, 16))
        roots.append(str(root))
    options = dict(seed=5, episode_pool_size=40, return_uint8=True, allow_duplicates=True)
    staged = MixtureDataset(roots, decode_device="cpu", **options)
    stage = DecodeStage("cpu", threads=2)
    shipped = batches = 0
    got = []
    for batch in torch.utils.data.DataLoader(staged, batch_size=16, num_workers=2, collate_fn=collate):
        members = batch[ENCODED_KEY][camera]["members"]
        shipped += sum(m.data is not None for m in members)
        batches += 1
        got.append(stage(batch))
    expected = list(torch.utils.data.DataLoader(MixtureDataset(roots, **options), batch_size=16, num_workers=2))
    assert [b["index"].tolist() for b in got] == [b["index"].tolist() for b in expected]
    assert all(torch.equal(a[camera], b[camera]) for a, b in zip(got, expected))
    stats, admitted = stage.stats(), staged.stats()["episodes_admitted"]
    assert stats["admissions"] == admitted == shipped >= 220
    assert 220 <= stats["members_opened"] <= admitted
    assert stats["retirements"] == admitted and stats["members_held"] == 0
    assert stats["max_members_held"] <= 2 * 40
    assert stats["members_in_batches"] > 3 * stats["members_opened"]  # held across batches, not reopened


def test_a_new_backend_is_one_class_and_one_row(packed_hevc, monkeypatch):
    """The seam: a backend the stage has never heard of, registered in the table, decodes
    through the same scheduler (here: PyAV under another name, counting what it opens)."""
    from lerobot_shards.reader.decode import backends
    from lerobot_shards.reader.decode.backends import PyAVBackend

    class CountingBackend(PyAVBackend):
        name = "counting"
        opened = 0

        def open(self, member, spec):
            CountingBackend.opened += 1
            return super().open(member, spec)

    monkeypatch.setitem(backends.BACKENDS, ("counting", "cpu"), CountingBackend)
    stage = DecodeStage("cpu", backend="counting")
    plain = DecodeStage("cpu", backend="pyav")
    expected = [plain(batch) for batch in _encoded_batches(packed_hevc)]
    got = [stage(batch) for batch in _encoded_batches(packed_hevc)]
    assert stage.backend == "counting" and CountingBackend.opened == stage.stats()["members_opened"] > 0
    assert all(torch.equal(a[k], b[k]) for a, b in zip(expected, got) for k in DELTA if k.startswith("observation.images"))


def test_a_member_without_its_bytes_is_refused_not_guessed(packed_hevc):
    """Workers ship a member's bytes with an admission's first draw only; a stage that did not
    see that batch (another stage, a skipped batch) says so instead of decoding something else."""
    batches = _encoded_batches(packed_hevc)
    later = next(b for b in batches[1:] if any(m.data is None for p in b[ENCODED_KEY].values() for m in p["members"]))
    with pytest.raises(DecodeStageError, match="arrives without its bytes and the stage does not hold it"):
        DecodeStage("cpu")(later)


def test_batch_loader_with_a_stage_resumes_where_training_stood(packed_hevc):
    """The stage decodes ahead in a thread; the loader's state counts only what it yielded, so
    resuming from a checkpoint taken after k batches continues with batch k + 1, exactly."""
    from lerobot_shards import BatchLoader

    def loader(stage=None):
        dataset = PackedDataset(str(packed_hevc), delta_timestamps=DELTA, seed=4, return_uint8=True, decode_device="cpu")
        return dataset, BatchLoader(dataset, batch_size=4, num_workers=2, decode_stage=stage or DecodeStage("cpu"))

    reference_ds = PackedDataset(str(packed_hevc), delta_timestamps=DELTA, seed=4, return_uint8=True)
    reference = list(BatchLoader(reference_ds, batch_size=4, num_workers=2))
    _, first = loader()
    taken = []
    for batch in first:
        taken.append(batch)
        if len(taken) == 3:
            break
    state = first.state_dict()
    assert state["samples_consumed"] == 12
    _, resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert [b["index"].tolist() for b in taken + rest] == [b["index"].tolist() for b in reference]
    for got, want in zip(taken + rest, reference):
        assert torch.equal(got["observation.images.top"], want["observation.images.top"])
    with pytest.raises(ValueError, match="decode_stage decodes what workers ship with decode_device"):
        BatchLoader(reference_ds, batch_size=4, decode_stage=DecodeStage("cpu"))


def test_a_new_cpu_backend_serves_the_default_path_with_one_class_and_one_row(packed_hevc, monkeypatch):
    """The workers' decoders pick from the same table as the stage: a CPU backend registered
    there (one class, one row) is a ``decoder=`` choice at once and decodes the samples, with no
    other point to touch (issue 43)."""
    from lerobot_shards.reader.decode import backends
    from lerobot_shards.reader.decode.backends import PyAVBackend

    class CountingBackend(PyAVBackend):
        name = "counting"
        opened = 0

        @classmethod
        def member_decoder(cls, data, spec, *, depth=False):
            CountingBackend.opened += 1
            return super().member_decoder(data, spec, depth=depth)

    with pytest.raises(ArgumentError, match="decoder must be one of 'auto', 'pyav', 'torchcodec', got 'counting'"):
        PackedDataset(str(packed_hevc), decoder="counting")
    monkeypatch.setitem(backends.BACKENDS, ("counting", "cpu"), CountingBackend)
    counting = PackedDataset(str(packed_hevc), delta_timestamps=DELTA, seed=4, return_uint8=True, decoder="counting")
    plain = PackedDataset(str(packed_hevc), delta_timestamps=DELTA, seed=4, return_uint8=True, decoder="pyav")
    assert counting.decoder_backend == "counting"
    got, expected = list(counting), list(plain)
    assert len(got) == len(expected) > 0 and CountingBackend.opened > 0
    for a, b in zip(got, expected, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a if k.startswith("observation.images"))
