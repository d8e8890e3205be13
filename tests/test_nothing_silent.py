"""Nothing lost in silence (issue 42): when the program knows data is missing, unusable or
dropped, it says so where the user looks. Each test is one finding of the new-user report,
reproduced as it was met."""

from __future__ import annotations

import pytest
import torch

from reader import BatchLoader, PackedDataset
from reader.errors import ArgumentError
from tests.packed_fixtures import *  # noqa: F401,F403


# -- 1: decode_device the loader cannot serve ---------------------------------------------------
def test_1_a_loader_without_a_stage_attaches_one_and_batches_keep_their_cameras(packed_hevc):
    """Was: batches with ``__encoded_video__`` and none of the cameras, no error."""
    plain = PackedDataset(str(packed_hevc), seed=2, return_uint8=True)
    staged = PackedDataset(str(packed_hevc), seed=2, return_uint8=True, decode_device="cpu")
    expected = next(iter(BatchLoader(plain, batch_size=2, num_workers=0)))
    got = next(iter(BatchLoader(staged, batch_size=2, num_workers=0)))
    assert "__encoded_video__" not in got
    assert sorted(got) == sorted(expected)
    cameras = [k for k in expected if k.startswith("observation.images.")]
    assert cameras and all(torch.equal(got[k], expected[k]) for k in cameras)


def test_1_a_plain_dataloader_says_what_to_use_instead(packed_hevc):
    """Was: ``default_collate: batch must contain tensors ... found EncodedFrames``."""
    staged = PackedDataset(str(packed_hevc), seed=2, return_uint8=True, decode_device="cpu")
    with pytest.raises(ArgumentError, match="iterate the dataset with lerobot_shards.BatchLoader"):
        next(iter(torch.utils.data.DataLoader(staged, batch_size=2, num_workers=0)))


def test_1_cuda_decoding_of_an_av1_pack_is_refused_when_the_dataset_is_made(packed_copy, packed_hevc):
    """Was: accepted at construction, although the manifest says AV1 and NVDEC has none."""
    with pytest.raises(ArgumentError, match=r"decode_device='cuda' decodes .*h264.*camera observation\.images\.\S+ of .* holds "
                                            r"av1.*--video hevc"):
        PackedDataset(str(packed_copy), decode_device="cuda")
    PackedDataset(str(packed_hevc), decode_device="cuda")  # HEVC is what NVDEC decodes: accepted
