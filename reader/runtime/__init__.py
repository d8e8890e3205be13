"""What runs inside one consumer: building samples (and batches) from admitted episodes,
mixture harmonization, and the counters workers publish."""
