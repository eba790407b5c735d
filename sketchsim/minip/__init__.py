"""Boolean Min-IP, ``t_i = min_j <x_i, x_j>`` (THEORY section 1): bit packing and jitted kernels.

``bits`` packs 0/1 tokens into uint64 words and counts ones; ``kernel`` computes
the targets over packed inputs (``lanes`` holds its eight-lane inner loop);
``token_ids`` numbers distinct tokens the same way everywhere.
"""
