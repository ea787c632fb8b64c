/* The wire contract's constants for the C parts: the ranks' backend (mmpi/_backend/*.c) and
 * the forwarder's relay (forwarder/_crelay.c). mmpi/wire/protocol.py is the reference;
 * tests/unit/test_wire_header.py holds every value here against it. */
#ifndef MMPI_WIRE_H
#define MMPI_WIRE_H

#define WIRE_VERSION 2 /* protocol.VERSION */

/* MPI tags on the control channel (protocol.T_*) */
#define WIRE_T_EAGER 1
#define WIRE_T_LARGE 2
#define WIRE_T_COLL 3

/* envelope kinds (protocol.K_*) */
#define WIRE_K_P2P 1

/* the envelope, "<BBHiiiiQIII" (protocol._ENVELOPE, protocol.WIRE_FIELDS): size and where
 * each field starts */
#define WIRE_ENVELOPE_SIZE 40
#define WIRE_OFF_VERSION 0
#define WIRE_OFF_KIND 1
#define WIRE_OFF_FLAGS 2
#define WIRE_OFF_SRC 4
#define WIRE_OFF_DST 8
#define WIRE_OFF_TAG 12
#define WIRE_OFF_CONTEXT 16
#define WIRE_OFF_NBYTES 20
#define WIRE_OFF_CHUNK 28
#define WIRE_OFF_XFER 32
#define WIRE_OFF_AUX 36

#define WIRE_MAX_XFER ((1 << 28) - 1) /* protocol.MAX_XFER: the largest chunk tag */

#endif
