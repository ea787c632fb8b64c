"""The progress engine of a rank and its transports: links, point to point, crossings.

Below the communicators and the collectives: the engine drains the forwarder links and the
native world, matches messages in MPI's order, moves large messages in chunks under credits,
and notices a lost forwarder or a departed rank.
"""
