"""MPI-IO across the zipper: a native file per cluster on one shared file system."""
