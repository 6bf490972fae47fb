"""An `ssl.SSLContext` for a client from `TlsSettings` (files or PEM text).

Built where the connection is made (the CLI, a Spark executor), because a
context cannot be pickled. PEM given as text (Kafka's `ssl.truststore.certificates`,
`ssl.keystore.certificate.chain`, `ssl.keystore.key`) often arrives with its line
breaks lost to a properties file's continuation lines, as Kafka tolerates; it is
re-wrapped before OpenSSL reads it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import ssl
import tempfile
import textwrap
from pathlib import Path

from broker.client.security_config import SecurityConfigError, TlsSettings

_PEM_BLOCK = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]+)-----(?P<body>.*?)-----END (?P=label)-----", re.DOTALL
)


def normalize_pem(text: str) -> str:
    """Every PEM block of ``text`` with its base64 body in 64-column lines."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text.replace("\\n", "\n")):
        body = re.sub(r"\s+", "", match.group("body"))
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise SecurityConfigError(
                f"PEM block {match.group('label')} is not valid base64"
            ) from None
        label = match.group("label")
        wrapped = "\n".join(textwrap.wrap(body, 64))
        blocks.append(f"-----BEGIN {label}-----\n{wrapped}\n-----END {label}-----\n")
    if not blocks:
        raise SecurityConfigError("no PEM block (-----BEGIN ...-----) found")
    return "".join(blocks)


@functools.lru_cache(maxsize=16)
def build_ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """A client context: trust anchors, hostname check and the optional client certificate.

    Cached per settings: a Spark task opens a connection per input partition, and loading
    certificates costs more than the handshake. Given CAs replace the system's, as with
    librdkafka's `ssl.ca.location`; without them the system's default CAs are trusted.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED if tls.verify_certificates else ssl.CERT_NONE
    try:
        if tls.ca_file is None and tls.ca_pem is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if tls.ca_file is not None:
            path = Path(tls.ca_file)
            if path.is_dir():
                context.load_verify_locations(capath=str(path))
            else:
                context.load_verify_locations(cadata=normalize_pem(_read(path, "CA")))
        elif tls.ca_pem is not None:
            context.load_verify_locations(cadata=normalize_pem(tls.ca_pem))
        if tls.has_client_certificate:
            _load_client_certificate(context, tls)
    except ssl.SSLError as exc:
        raise SecurityConfigError(f"TLS settings: {exc.reason or exc}") from None
    return context


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise SecurityConfigError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SecurityConfigError(f"the {what} file {path} is not PEM text") from None


def _load_client_certificate(context: ssl.SSLContext, tls: TlsSettings) -> None:
    certificate = (
        _read(Path(tls.certificate_file), "certificate")
        if tls.certificate_file is not None
        else tls.certificate_pem or ""
    )
    key = _read(Path(tls.key_file), "key") if tls.key_file is not None else tls.key_pem or ""
    # load_cert_chain reads files only: private temporary ones, gone once loaded.
    with tempfile.TemporaryDirectory(prefix="broker-client-tls-") as directory:
        cert_path = os.path.join(directory, "certificate.pem")
        key_path = os.path.join(directory, "key.pem")
        for path, text in ((cert_path, certificate), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(normalize_pem(text))
        try:
            context.load_cert_chain(cert_path, key_path, password=tls.key_password)
        except ssl.SSLError as exc:
            raise SecurityConfigError(
                f"client certificate and key do not load: {exc.reason or exc}"
                " (wrong ssl.key.password, or a key that does not match the certificate?)"
            ) from None
