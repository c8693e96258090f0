"""Sealed files: AES-256-GCM encryption of a whole file, in segments, with the key derived
from a passphrase or key by scrypt.

Format: ``MAGIC`` (8 bytes), scrypt salt (16), nonce prefix (8), segment size (4, big
endian), then segments of ``segment size`` plaintext bytes, each encrypted with AES-256-GCM
(nonce = prefix + 4-byte index) and authenticated together with the header, its index and a
last-segment flag, so a segment cannot be altered, reordered, dropped or the file cut short
without decryption failing. Nothing of the plaintext (not even DuckDB's header) is visible.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from contextd.errors import StoreError

MAGIC = b"CTXDENC1"
CHECK_MAGIC = b"CTXDKCV1"
_CHECK_LABEL = b"contextd key check value"
SEGMENT_BYTES = 4 * 1024 * 1024
_HEADER = struct.Struct(">8s16s8sI")
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
TAG_BYTES = 16


class WrongKey(StoreError):
    """The key does not open this file (wrong key, or the file was tampered with)."""


def derive(secret: bytes, salt: bytes) -> bytes:
    """The AES-256 key of a secret (any length) and a file's salt."""
    return hashlib.scrypt(secret, salt=salt, dklen=32, **_SCRYPT)


def is_sealed(path: Path) -> bool:
    """Whether a file starts with the sealed-file magic."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _aad(header: bytes, index: int, last: bool) -> bytes:
    return header + struct.pack(">I?", index, last)


def seal(source: Path, target: Path, secret: bytes) -> None:
    """Encrypt ``source`` into ``target`` (written beside it first, then renamed)."""
    salt, prefix = os.urandom(16), os.urandom(8)
    header = _HEADER.pack(MAGIC, salt, prefix, SEGMENT_BYTES)
    aes = AESGCM(derive(secret, salt))
    partial = target.with_name(target.name + ".sealing")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
        out.write(header)
        index, block = 0, src.read(SEGMENT_BYTES)
        while True:
            following = src.read(SEGMENT_BYTES)
            last = not following
            nonce = prefix + struct.pack(">I", index)
            out.write(aes.encrypt(nonce, block, _aad(header, index, last)))
            if last:
                break
            index, block = index + 1, following
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)


def unseal(source: Path, target: Path, secret: bytes) -> None:
    """Decrypt ``source`` into ``target`` (mode 0600); raises :class:`WrongKey`."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
            _unseal_stream(src, out, secret, source)
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def verify_key(source: Path, secret: bytes) -> None:
    """Raise :class:`WrongKey` unless ``secret`` opens ``source``: its first segment is
    decrypted and authenticated (with the header), which no other key can do. Cheap (one
    segment), so it runs before anything trusts a key, a leftover decrypted copy included."""
    with open(source, "rb") as src:
        header, prefix, segment, aes = _read_header(src, secret, source)
        block = src.read(segment + TAG_BYTES)
        _decrypt(aes, header, prefix, 0, block, not src.read(1), source)


def write_key_check(target: Path, secret: bytes) -> None:
    """Write a key check value of ``secret`` into ``target``: a fresh salt and an HMAC of a
    fixed label under the key derived from it. It proves which key a decrypted copy belongs
    to where no sealed file exists yet (an owner that died before its first seal), and
    reveals nothing of the key (scrypt, then a one-way MAC). Written beside ``target`` and
    renamed, with fsync, so it is whole before the copy it vouches for exists."""
    salt = os.urandom(16)
    partial = target.with_name(target.name + ".writing")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(CHECK_MAGIC + salt + _check_mac(secret, salt))
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)


def verify_key_check(source: Path, secret: bytes) -> None:
    """Raise :class:`WrongKey` unless ``secret`` is the key whose check value ``source``
    holds (:func:`write_key_check`)."""
    data = source.read_bytes()
    salt = data[len(CHECK_MAGIC):len(CHECK_MAGIC) + 16]
    expected = data[len(CHECK_MAGIC) + 16:]
    if not data.startswith(CHECK_MAGIC) or len(salt) != 16 \
            or not hmac.compare_digest(expected, _check_mac(secret, salt)):
        raise WrongKey(f"cannot open the decrypted copy beside {source}: wrong key "
                       "(security.key_env / key_file), or its key check value is damaged")


def _check_mac(secret: bytes, salt: bytes) -> bytes:
    return hmac.new(derive(secret, salt), _CHECK_LABEL, hashlib.sha256).digest()


def _read_header(src: BinaryIO, secret: bytes, name: Path) -> tuple[bytes, bytes, int, AESGCM]:
    header = src.read(_HEADER.size)
    if len(header) != _HEADER.size or not header.startswith(MAGIC):
        raise StoreError(f"{name} is not an encrypted contextd index (security.encrypt_db is "
                         "on); restore an encrypted backup or turn encryption off")
    _, salt, prefix, segment = _HEADER.unpack(header)
    return header, prefix, segment, AESGCM(derive(secret, salt))


def _decrypt(aes: AESGCM, header: bytes, prefix: bytes, index: int, block: bytes, last: bool,
             name: Path) -> bytes:
    try:
        return aes.decrypt(prefix + struct.pack(">I", index), block, _aad(header, index, last))
    except InvalidTag:
        raise WrongKey(f"cannot decrypt {name}: wrong key (security.key_env / key_file), "
                       "or the file is damaged") from None


def _unseal_stream(src: BinaryIO, out: BinaryIO, secret: bytes, name: Path) -> None:
    header, prefix, segment, aes = _read_header(src, secret, name)
    index, block = 0, src.read(segment + TAG_BYTES)
    while True:
        following = src.read(segment + TAG_BYTES)
        last = not following
        out.write(_decrypt(aes, header, prefix, index, block, last, name))
        if last:
            return
        index, block = index + 1, following
