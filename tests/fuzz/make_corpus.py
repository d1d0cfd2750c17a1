#!/usr/bin/env python3
"""Writes the seed corpora: one well-formed input per frame kind, so the
fuzzers and the standalone runs start from inputs that get past decoding."""
import os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))

def tcp_hdr(kind, status=0, flags=0, req=0, slot=0, key=0, off=0, ln=0, operand=0):
    return struct.pack('<BBHHHIIQQQQQ', 1, kind, status, flags, 0, req, slot, key, off, ln, operand, 0)

AM_VERSION = 2

def am(kind, op=0, flags=0, status=0, rank=0, req=0, slot=0, key=0, off=0, operand=0, compare=0, tag=0):
    return struct.pack('<BBBBHHiIIIQQQQQ', AM_VERSION, kind, op, flags, status, 0, rank, req, slot, 0,
                       key, off, operand, compare, tag)

def write(d, name, data):
    os.makedirs(os.path.join(here, 'corpus', d), exist_ok=True)
    with open(os.path.join(here, 'corpus', d, name), 'wb') as f:
        f.write(data)

HELLO, AUTH, PUT, PUT_ACK, GET, GET_RESP, FLUSH, FLUSH_ACK, IMPORT, IMPORT_RESP, AM, BYE = range(1, 13)
frames = {
    'hello': tcp_hdr(HELLO, ln=32, operand=1) + bytes(32),
    'auth': tcp_hdr(AUTH, ln=32) + bytes(32),
    'put': tcp_hdr(PUT, key=1, off=8, ln=16) + bytes(range(16)),
    'put_ack': tcp_hdr(PUT, flags=1, key=1, ln=8) + bytes(8),
    'put_notify': tcp_hdr(PUT, flags=2, key=1, ln=8, operand=99) + bytes(8),
    'get_notify': tcp_hdr(GET, flags=2, key=1, off=8, ln=8, operand=99),
    'put_bad_key': tcp_hdr(PUT, key=2, ln=8) + bytes(8),
    'put_oob': tcp_hdr(PUT, key=1, off=4090, ln=16) + bytes(16),
    'get': tcp_hdr(GET, key=1, off=100, ln=64),
    'flush': tcp_hdr(FLUSH, req=5),
    'import': tcp_hdr(IMPORT, ln=3) + b'seg',
    'import_handle': tcp_hdr(IMPORT, slot=0, key=1),
    'am': tcp_hdr(AM, ln=64) + am(1, op=1, rank=1, key=1, off=8, operand=1),
    'am_signal': tcp_hdr(AM, ln=64) + am(5, op=1, flags=3, rank=1, key=1, off=8, operand=1, tag=5),
    'am_notify': tcp_hdr(AM, ln=64) + am(3, rank=1, operand=77),
    'am_count': tcp_hdr(AM, ln=64) + am(4, rank=1, slot=3, operand=2),
    'reply': tcp_hdr(GET_RESP, req=7, ln=0),
    'bye': tcp_hdr(BYE),
}
for name, data in frames.items():
    write('tcp_frame', name, data[:56])
    write('tcp_rx', name, data)
write('tcp_rx', 'several', b''.join(frames[k] for k in ('put', 'get', 'flush', 'am', 'import')))
write('am', 'atomic', am(1, op=1, rank=3, req=9, slot=2, key=77, off=8, operand=1))
write('am', 'reply', am(2, status=0, rank=1, req=9, operand=42))
write('am', 'notify', am(3, rank=1, operand=42))
write('am', 'count', am(4, flags=1, rank=1, req=3, slot=5, operand=2))
write('am', 'signal', am(5, op=1, flags=2, rank=1, req=3, slot=2, key=77, off=16, operand=2, tag=9))
