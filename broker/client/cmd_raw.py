"""`raw API_KEY VERSION JSON`: any request built from JSON, response printed as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from broker.client.jsonify import from_json, to_json
from broker.client.session import ClientError, ClientSession
from broker.protocol.api import REQUEST_TYPES

EXAMPLES = """examples:
  broker client raw 18 3 '{}'
  broker client raw 3 12 '{"topics": [{"name": "orders"}]}'
  echo '{"groups": ["g1"]}' | broker client raw 15 5 -

JSON keys are the snake_case field names of Kafka's message definitions
(camelCase is accepted); nested structs are objects, arrays are lists. bytes
and records fields take a UTF-8 string, or "base64:<data>"; responses print
them as "base64:<data>".
"""


def add_parser(commands: object, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(  # type: ignore[attr-defined]
        "raw",
        parents=[common],
        help="send any request built from JSON and print the response as JSON",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("api_key", type=int, metavar="API_KEY")
    p.add_argument("version", type=int, metavar="VERSION")
    p.add_argument("body", metavar="JSON", help="the request body as JSON ('-' reads stdin)")
    p.set_defaults(run=raw, negotiate=False)


async def raw(session: ClientSession, args: argparse.Namespace) -> int:
    request_type = REQUEST_TYPES.get(args.api_key)
    if request_type is None:
        raise ClientError(f"unknown api key {args.api_key}")
    text = sys.stdin.read() if args.body == "-" else args.body
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(f"bad JSON: {exc}") from None
    body = from_json(request_type, data)
    response = await session.request(body, args.version)
    print(json.dumps(to_json(response), indent=2))
    return 0
