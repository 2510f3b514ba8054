#!/usr/bin/env python3
"""Hostile clients for dsdoctor's agent and viewer ports (e2e tests and bench/agent_preauth.sh only).

  relay   --listen H:P --to H:P --record PREFIX   forward connections, recording each client's bytes
                                                  to PREFIX.<n>.client and the server's to PREFIX.<n>.server
  replay  --to H:P --file F                       send F's bytes, print what came back
  flood   --to H:P --idle N --oversized M         hold N idle connections and send M frames of 16 MiB of
          [--hold S] [--mix-tls]                  nested JSON before any hello, for S seconds
  churn   --to H:P --source ADDR [--procs N]      open connections from ADDR as fast as N processes can,
          [--seconds S]                           each sending one byte and then a reset; prints the rate
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time


def endpoint(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def relay(args):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(endpoint(args.listen))
    srv.listen(64)
    print("relay-ready", flush=True)
    n = 0
    deadline = time.time() + args.seconds
    srv.settimeout(0.2)
    while time.time() < deadline:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=pump_pair, args=(c, args.to, f"{args.record}.{n}"), daemon=True).start()
        n += 1


def pump_pair(client, to, prefix):
    try:
        server = socket.create_connection(endpoint(to), timeout=5)
    except OSError:
        client.close()
        return
    def pump(src, dst, path):
        with open(path, "wb") as out:
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                out.write(data)
                out.flush()
                try:
                    dst.sendall(data)
                except OSError:
                    break
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    a = threading.Thread(target=pump, args=(client, server, prefix + ".client"))
    b = threading.Thread(target=pump, args=(server, client, prefix + ".server"))
    a.start(); b.start(); a.join(); b.join()


def replay(args):
    data = open(args.file, "rb").read()
    s = socket.create_connection(endpoint(args.to), timeout=5)
    s.sendall(data)
    got = b""
    s.settimeout(3)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print(f"replay-sent={len(data)} replay-answer-bytes={len(got)} welcome={'yes' if b'welcome' in got else 'no'}",
          flush=True)


def oversized(to, nbytes, tls=False):
    # A frame header announcing nbytes, then nested JSON: what an unauthenticated peer could make a
    # plaintext agent parse before checking a token. With tls, a TLS handshake record header
    # announcing 16 KiB instead, then the same flood.
    try:
        s = socket.create_connection(to, timeout=5)
        s.sendall(b"\x16\x03\x01\x40\x00" if tls else b"DSD\x01" + struct.pack(">I", nbytes))
        chunk = b"[" * 65536
        sent = 0
        while sent < nbytes:
            s.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the agent hung up early: what we want


def flood(args):
    to = endpoint(args.to)
    idle = []
    for _ in range(args.idle):
        try:
            idle.append(socket.create_connection(to, timeout=5))
        except OSError:
            pass
    threads = [threading.Thread(target=oversized, args=(to, 16 << 20, i % 2 == 1 and args.mix_tls))
               for i in range(args.oversized)]
    for t in threads:
        t.start()
    print(f"flood-ready idle={len(idle)}", flush=True)
    for t in threads:
        t.join()
    time.sleep(args.hold)
    print("flood-done", flush=True)


def churn_loop(to, source, deadline, counter):
    linger = struct.pack("ii", 1, 0)  # close with a reset: no TIME_WAIT, so ports never run out
    while time.time() < deadline:
        n = 0
        for _ in range(256):
            s = socket.socket()
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                s.bind((source, 0))
                s.connect(to)
                s.send(b"\x16")
                n += 1
            except OSError:
                pass
            finally:
                s.close()
        with counter.get_lock():
            counter.value += n


def churn(args):
    import multiprocessing
    import signal

    to = endpoint(args.to)
    counter = multiprocessing.Value("q", 0)
    t0 = time.time()
    deadline = t0 + args.seconds
    procs = [multiprocessing.Process(target=churn_loop, args=(to, args.source, deadline, counter), daemon=True)
             for _ in range(args.procs)]
    for p in procs:
        p.start()

    def stop(*_):  # SIGTERM: end the churners (ours, by pid) and report
        for p in procs:
            p.terminate()

    signal.signal(signal.SIGTERM, stop)
    print("churn-ready", flush=True)
    for p in procs:
        p.join()
    elapsed = time.time() - t0
    print(f"churn-done connections={counter.value} per_second={counter.value / elapsed:.0f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("relay")
    r.add_argument("--listen", required=True)
    r.add_argument("--to", required=True)
    r.add_argument("--record", required=True)
    r.add_argument("--seconds", type=float, default=30)
    p = sub.add_parser("replay")
    p.add_argument("--to", required=True)
    p.add_argument("--file", required=True)
    f = sub.add_parser("flood")
    f.add_argument("--to", required=True)
    f.add_argument("--idle", type=int, default=0)
    f.add_argument("--oversized", type=int, default=0)
    f.add_argument("--hold", type=float, default=0)
    f.add_argument("--mix-tls", action="store_true", help="every other oversized sender uses a TLS record header")
    c = sub.add_parser("churn")
    c.add_argument("--to", required=True)
    c.add_argument("--source", required=True)
    c.add_argument("--procs", type=int, default=1)
    c.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    {"relay": relay, "replay": replay, "flood": flood, "churn": churn}[args.cmd](args)


if __name__ == "__main__":
    main()
