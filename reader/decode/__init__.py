"""Frames out of compressed episode members: the CPU decoders (``frames``) and the decode
stage that runs outside the DataLoader workers, on the CPU or the GPU (``stage``)."""
