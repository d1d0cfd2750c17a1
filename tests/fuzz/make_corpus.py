#!/usr/bin/env python3
"""Writes the seed corpora of the wire fuzzers, so the fuzzers and the
standalone runs start from inputs that get past decoding:

  tcp_frame  one v2 frame header (wire/tcp_frame.h) per kind and flag rule,
             a trailer after the header where the frame has one
  am         v4 active-message headers (wire/am.h): every argument count,
             requests and replies, the application's handler 0 and core's
             handlers 1024..1031
  handshake  HELLO, AUTH and WELCOME payloads (wire/handshake.h)
  tcp_rx     byte streams of whole v2 frames as a connected peer sends them
             after the handshake, against fuzz_tcp_rx's one exported buffer
             (slot 0, key 1, 4096 bytes)

Each of these directories is emptied first, so it holds exactly what this
script writes (boot_msg and ep are not this script's). Run it after a wire
format changes: python3 tests/fuzz/make_corpus.py"""
import os
import shutil
import struct

here = os.path.dirname(os.path.abspath(__file__))

# --- netvm.h ------------------------------------------------------------------------------
OK, ERR_INVAL, ERR_KEY, ERR_BOUNDS, ERR_RIGHTS, ERR_REVOKED, ERR_PEER = range(7)
ERR_NOTFOUND, ERR_FAULT, ERR_AGAIN, ERR_AUTH = 10, 12, 17, 18
AOP_ADD, AOP_FADD, AOP_SWAP, AOP_CSWAP, AOP_FCAA = range(5)
SIGNAL_SET, SIGNAL_ADD = 0, 1

# --- wire/tcp_frame.h ---------------------------------------------------------------------
TCP_VERSION = 2
(HELLO, AUTH, WELCOME, REFUSE, ATTACHED, PUT, PUT_ACK, GET, GET_RESP, FLUSH, FLUSH_ACK, AM,
 BYE) = range(1, 14)
F_ACK, F_NOTIFY, F_TRAILER = 1, 2, 4


def tcp_hdr(kind, status=0, flags=0, req=0, slot=0, key=0, off=0, ln=0, operand=0):
    # version u8 | kind u8 | status u16 | flags u16 | pad u16 | req_id u32 | slot u32 |
    # key u64 | off u64 | len u64 | operand u64 | pad u64
    h = struct.pack('<BBHHHIIQQQQQ', TCP_VERSION, kind, status, flags, 0, req, slot, key, off, ln,
                    operand, 0)
    assert len(h) == 56
    return h


def trailer(status=OK):
    return struct.pack('<Q', status)


# --- wire/am.h ----------------------------------------------------------------------------
AM_VERSION = 4
AMW_F_TOKEN, AMW_F_REPLY = 1, 2
# core's handlers (src/core/internal.h, NV_AMH_*): the first id past the application's
APP = 0
AMH_ATOMIC, AMH_SIGNAL, AMH_NOTIFY, AMH_COUNT, AMH_ERROR, AMH_IMPORT, AMH_CREDIT, AMH_BYE = range(1024, 1032)


def token(origin=0x5eed000000000007, call=0x00010003, pindex=0, key=0x6b6579206b657931,
          pkey=0):
    return (origin, call, pindex, key, pkey)


def am_hdr(handler, args=(), flags=0, status=OK, credits=0, ln=0, tok=None):
    # version u8 | flags u8 | handler u16 | nargs u8 | status u8 | credits u16 | len u32 |
    # args[nargs] u64 | token (origin u64, call u32, pindex u32, key u64) with F_TOKEN or
    # F_REPLY (the payload key is derived from the call key, not sent)
    assert len(args) <= 6
    b = struct.pack('<BBHBBHI', AM_VERSION, flags, handler, len(args), status, credits, ln)
    b += b''.join(struct.pack('<Q', a) for a in args)
    if flags & (AMW_F_TOKEN | AMW_F_REPLY):
        b += struct.pack('<QIIQ', *(tok or token())[:4])
    return b


def am_msg(handler, args=(), payload=b'', **kw):
    """An active message: its header, then its payload (eager)."""
    return am_hdr(handler, args, ln=len(payload), **kw) + payload


def word_arg(slot, op, mode=0):
    """args[0] of core's word operations: slot | op << 32 | mode << 40."""
    return slot | op << 32 | mode << 40


WORD_NOTIFY, WORD_REPLY_ERR = 1, 2

# one message per handler of core's, with arguments of the shape it takes
am_messages = {
    'app': am_msg(APP, (1, 2), b'hello, handler 0', credits=1),
    'app_noargs': am_msg(APP),
    'app_six': am_msg(APP, tuple(range(1, 7)), bytes(range(64))),
    'app_request': am_msg(APP, (42,), b'ping', flags=AMW_F_TOKEN, tok=token(pindex=1, pkey=0x706b6579)),
    'app_reply': am_msg(APP, (43,), b'pong', flags=AMW_F_REPLY, tok=token(pindex=1, pkey=0x706b6579)),
    'reply_error': am_hdr(APP, flags=AMW_F_REPLY, status=ERR_NOTFOUND, tok=token()),
    'atomic': am_hdr(AMH_ATOMIC, (word_arg(0, AOP_FADD), 1, 8, 5, 0, 0), flags=AMW_F_TOKEN, tok=token()),
    'atomic_cswap_notify': am_hdr(AMH_ATOMIC, (word_arg(0, AOP_CSWAP, WORD_NOTIFY), 1, 16, 9, 0, 77),
                                  flags=AMW_F_TOKEN, tok=token(call=0x00020004)),
    'atomic_misaligned': am_hdr(AMH_ATOMIC, (word_arg(0, AOP_SWAP), 1, 3, 1, 0, 0), flags=AMW_F_TOKEN,
                                tok=token()),
    'atomic_reply': am_hdr(AMH_ATOMIC, (41,), flags=AMW_F_REPLY, tok=token()),
    'signal': am_hdr(AMH_SIGNAL, (word_arg(0, SIGNAL_ADD, WORD_NOTIFY), 1, 24, 1, 5)),
    'signal_set_err': am_hdr(AMH_SIGNAL, (word_arg(0, SIGNAL_SET, WORD_REPLY_ERR), 2, 24, 1, 5)),
    'signal_request': am_hdr(AMH_SIGNAL, (word_arg(0, SIGNAL_SET), 1, 4088, 7, 6), flags=AMW_F_TOKEN,
                             tok=token()),
    'notify': am_hdr(AMH_NOTIFY, (99,)),
    'count': am_hdr(AMH_COUNT, (3, 2)),
    'count_beyond': am_hdr(AMH_COUNT, (1 << 20, 1)),
    'error': am_hdr(AMH_ERROR, (ERR_BOUNDS,)),
    'import_name': am_msg(AMH_IMPORT, (), b'seg', flags=AMW_F_TOKEN, tok=token()),
    'import_handle': am_hdr(AMH_IMPORT, (0, 1), flags=AMW_F_TOKEN, tok=token()),
    'import_reply': am_hdr(AMH_IMPORT, (0, 1, 4096, 7), flags=AMW_F_REPLY, tok=token()),
    'credit': am_hdr(AMH_CREDIT, credits=8),
    'bye': am_hdr(AMH_BYE),
}

# --- wire/handshake.h ---------------------------------------------------------------------
HS_PROTO = 2
HS_JOB, HS_SERVICE = 1, 2
HS_LINK_TCP, HS_LINK_UPGRADE = 0, 1


def hs_hello(purpose=HS_JOB, uuid=0x1111222233334444, job_hash=0x6a6f622068617368, rank=0, flags=0,
             host_id=0x686f737420696431, nonce=bytes(range(0x20, 0x40))):
    b = struct.pack('<IIQQiIQ', HS_PROTO, purpose, uuid, job_hash, rank, flags, host_id) + nonce
    assert len(b) == 72
    return b


def hs_auth(mac=bytes(range(0x80, 0xa0)), peer_id=0, card=b''):
    return mac + struct.pack('<II', peer_id, len(card)) + card


def hs_welcome(peer_id=1, link=HS_LINK_TCP, card=b''):
    return struct.pack('<IIII', peer_id, link, len(card), 0) + card


card = b'shm-card:' + bytes(range(23))   # opaque: the link's own business, 32 bytes
handshake = {
    'hello_job': hs_hello(),
    'hello_job_rank7': hs_hello(rank=7),
    'hello_service': hs_hello(purpose=HS_SERVICE, job_hash=0, rank=-1),
    'auth_acceptor': hs_auth(),
    'auth_connector': hs_auth(peer_id=3, card=card),
    'auth_card_max': hs_auth(peer_id=1, card=bytes(range(64))),
    'welcome_tcp': hs_welcome(peer_id=2),
    'welcome_upgrade': hs_welcome(peer_id=2, link=HS_LINK_UPGRADE, card=card),
}

# --- tcp frames ----------------------------------------------------------------------------
SLOT, KEY, BUF = 0, 1, 4096   # fuzz_tcp_rx's exported buffer


def am_frame(msg, flags=0, status=OK):
    f = tcp_hdr(AM, flags=flags, ln=len(msg)) + msg
    return f + trailer(status) if flags & F_TRAILER else f


def put(off, data, flags=0, req=0, key=KEY, operand=0, tstatus=OK):
    f = tcp_hdr(PUT, flags=flags, req=req, slot=SLOT, key=key, off=off, ln=len(data), operand=operand) + data
    return f + trailer(tstatus) if flags & F_TRAILER else f


frames = {
    # the handshake's frames, which a connected peer may not send any more
    'hello': tcp_hdr(HELLO, ln=72) + hs_hello(),
    'auth': tcp_hdr(AUTH, ln=40 + len(card)) + hs_auth(peer_id=3, card=card),
    'welcome': tcp_hdr(WELCOME, ln=16) + hs_welcome(),
    'refuse': tcp_hdr(REFUSE, status=ERR_AGAIN),
    'attached': tcp_hdr(ATTACHED),
    # one-sided traffic
    'put': put(8, bytes(range(16))),
    'put_ack': put(0, bytes(8), flags=F_ACK, req=1),
    'put_notify': put(64, bytes(8), flags=F_NOTIFY, operand=99),
    'put_ack_notify': put(1000, bytes(range(200)), flags=F_ACK | F_NOTIFY, req=2, operand=7),
    'put_trailer': put(2048, bytes(range(256)) * 2, flags=F_ACK | F_TRAILER, req=3),
    'put_trailer_fault': put(0, bytes(64), flags=F_ACK | F_TRAILER, req=4, tstatus=ERR_FAULT),
    'put_end': put(BUF - 16, bytes(range(16))),
    'put_empty': put(BUF, b'', flags=F_ACK, req=5),
    'put_bad_key': put(0, bytes(8), key=2),
    'put_oob': put(BUF - 6, bytes(16)),
    'get': tcp_hdr(GET, req=6, slot=SLOT, key=KEY, off=100, ln=64),
    'get_notify': tcp_hdr(GET, flags=F_NOTIFY, req=7, slot=SLOT, key=KEY, off=8, ln=8, operand=99),
    'get_all': tcp_hdr(GET, req=8, slot=SLOT, key=KEY, off=0, ln=BUF),
    'get_oob': tcp_hdr(GET, req=9, slot=SLOT, key=KEY, off=BUF - 8, ln=16),
    'get_bad_key': tcp_hdr(GET, req=10, slot=SLOT, key=3, ln=8),
    'flush': tcp_hdr(FLUSH, req=11),
    # answers nobody asked for
    'put_ack_stray': tcp_hdr(PUT_ACK, req=12),
    'get_resp_stray': tcp_hdr(GET_RESP, req=13, ln=8) + bytes(8),
    'get_resp_error': tcp_hdr(GET_RESP, status=ERR_BOUNDS, req=14, ln=8),
    'get_resp_trailer': tcp_hdr(GET_RESP, flags=F_TRAILER, req=15, ln=8) + bytes(8) + trailer(),
    'flush_ack_stray': tcp_hdr(FLUSH_ACK, status=ERR_KEY, req=16),
    # active messages
    **{'am_' + name: am_frame(msg) for name, msg in am_messages.items()},
    'am_trailer': am_frame(am_msg(APP, (5,), bytes(range(100))), flags=F_TRAILER),
    'am_trailer_fault': am_frame(am_msg(APP, (5,), bytes(100)), flags=F_TRAILER, status=ERR_FAULT),
    'am_short_payload': tcp_hdr(AM, ln=12 + 8) + am_hdr(APP, ln=16) + bytes(8),
    'bye': tcp_hdr(BYE),
}

# streams of several frames: one of each kind of traffic, then BYE; every one-sided frame; every
# active message (each under the standalone driver's 4096-byte input limit)
handshake_kinds = ('hello', 'auth', 'welcome', 'refuse', 'attached', 'bye')
streams = {
    'several': b''.join(frames[k] for k in ('put', 'put_ack', 'get', 'am_app', 'am_atomic', 'am_signal',
                                            'am_notify', 'flush', 'am_credit', 'bye')),
    'every_rma': b''.join(v for k, v in frames.items() if k not in handshake_kinds and not k.startswith('am_'))
                 + frames['bye'],
    'every_am': b''.join(v for k, v in frames.items() if k.startswith('am_') and k != 'am_short_payload')
                + frames['bye'],
}
assert all(len(v) <= 4096 for v in streams.values())

# frames cut short by the peer's close: the receiver must end what it began
# (a large message's landing gets its am_end, a get's answer fails, nothing
# is written past what arrived)
cut_am = am_hdr(APP, (1,), ln=100000)
cut_huge = am_hdr(APP, ln=5 << 20)
cut = {
    'cut_put': tcp_hdr(PUT, flags=F_ACK, req=1, slot=SLOT, key=KEY, off=0, ln=4096) + bytes(range(100)),
    'cut_am_large': tcp_hdr(AM, ln=len(cut_am) + 100000) + cut_am + bytes(1000),
    'cut_am_huge': tcp_hdr(AM, ln=len(cut_huge) + (5 << 20)) + cut_huge + bytes(1000),
    'cut_get_resp': tcp_hdr(GET_RESP, req=17, ln=65536) + bytes(2000),
}
assert all(len(v) <= 4096 for v in cut.values())

# headers only, for the frame decoder: one per kind and flag rule
headers = {
    'hello': tcp_hdr(HELLO, ln=72),
    'auth': tcp_hdr(AUTH, ln=40 + len(card)),
    'welcome': tcp_hdr(WELCOME, ln=16),
    'welcome_max': tcp_hdr(WELCOME, ln=256),
    'refuse': tcp_hdr(REFUSE, status=ERR_AUTH),
    'attached': tcp_hdr(ATTACHED, status=OK),
    'put': tcp_hdr(PUT, slot=SLOT, key=KEY, off=8, ln=16),
    'put_ack': tcp_hdr(PUT, flags=F_ACK, req=1, key=KEY, ln=8),
    'put_notify': tcp_hdr(PUT, flags=F_NOTIFY, key=KEY, ln=8, operand=99),
    'put_all_flags': tcp_hdr(PUT, flags=F_ACK | F_NOTIFY | F_TRAILER, req=2, key=KEY, ln=1 << 30,
                             operand=3) + trailer(),
    'put_ack_kind': tcp_hdr(PUT_ACK, status=ERR_KEY, req=1),
    'get': tcp_hdr(GET, req=3, key=KEY, off=100, ln=64),
    'get_notify': tcp_hdr(GET, flags=F_NOTIFY, req=4, key=KEY, ln=8, operand=99),
    'get_resp': tcp_hdr(GET_RESP, req=3, ln=64),
    'get_resp_error': tcp_hdr(GET_RESP, status=ERR_BOUNDS, req=3, ln=64),
    'get_resp_trailer': tcp_hdr(GET_RESP, flags=F_TRAILER, req=3, ln=64) + trailer(ERR_FAULT),
    'flush': tcp_hdr(FLUSH, req=5),
    'flush_ack': tcp_hdr(FLUSH_ACK, status=ERR_REVOKED, req=5),
    'am': tcp_hdr(AM, ln=len(am_messages['app'])),
    'am_trailer': tcp_hdr(AM, flags=F_TRAILER, ln=(1 << 30) + 512) + trailer(),
    'bye': tcp_hdr(BYE),
}


def write_dir(d, files):
    path = os.path.join(here, 'corpus', d)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for name, data in files.items():
        with open(os.path.join(path, name), 'wb') as f:
            f.write(data)


write_dir('tcp_frame', headers)
write_dir('am', am_messages)
write_dir('handshake', handshake)
write_dir('tcp_rx', {**frames, **streams, **cut})
