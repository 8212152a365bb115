"""Images an envelope carries: their shape in ``event_data``, the check the hub and the SDK share,
and the URL a model is sent.

An ``ag2.msg.text`` or ``ag2.packet`` envelope may carry images beside its text, as a list under
``event_data["images"]`` (the two shapes of an image input AG2 has — by URL, or inline data with
its media type):

* ``{"url": "https://example.com/cat.png"}`` — by reference (``http`` or ``https``); an optional
  ``"media_type"`` names the format;
* ``{"data": "<base64>", "media_type": "image/png"}`` — inline, standard base64 with padding.

Either may add ``"detail": "auto" | "low" | "high"`` (passed to the model). At most
:data:`MAX_IMAGES_PER_ENVELOPE` images; their bytes count toward the envelope's ``event_data``
limit (the hub's ``--max-event-data-bytes``, 1 MiB of JSON by default, so inline images total
about 750 KiB before base64). Anything else is refused with ``InvalidArgument`` naming the item.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from netkernel.envelope import EV_PACKET, EV_TEXT, Envelope
from netkernel.errors import InvalidArgument

__all__ = [
    "IMAGE_DETAILS",
    "IMAGE_MEDIA_TYPES",
    "IMAGE_URL_SCHEMES",
    "MAX_IMAGES_PER_ENVELOPE",
    "MAX_IMAGE_URL_CHARS",
    "check_images",
    "envelope_images",
    "image_url",
]

IMAGES_KEY = "images"
"""The ``event_data`` key holding an envelope's images."""
IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The media types an image may have (what OpenAI-compatible vision models accept)."""
IMAGE_URL_SCHEMES = frozenset({"http", "https"})
"""The schemes an image URL may use; inline data goes in ``data`` (not a ``data:`` URL)."""
IMAGE_DETAILS = frozenset({"auto", "low", "high"})
"""The values of an image's optional ``detail``."""
MAX_IMAGES_PER_ENVELOPE = 16
"""The most images one envelope may carry."""
MAX_IMAGE_URL_CHARS = 2048
"""The longest image URL accepted, in characters."""
_KEYS = frozenset({"url", "data", "media_type", "detail"})
_IMAGE_EVENT_TYPES = frozenset({EV_TEXT, EV_PACKET})


def _refuse(index: int, what: str) -> InvalidArgument:
    field = f"event_data.images[{index}]"
    return InvalidArgument(
        f"{field}: {what}. An image is {{'url': 'https://…'}} or {{'data': '<base64>', 'media_type': 'image/png'}} "
        '(docs/network.md "Images").',
        metadata={"field": field},
    )


def _check_one(index: int, item: Any) -> None:
    if not isinstance(item, Mapping):
        raise _refuse(index, f"is a JSON {type(item).__name__}, not an object")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise _refuse(index, f"has unknown keys {unknown} (known: {sorted(_KEYS)})")
    url, data, media_type, detail = (item.get(k) for k in ("url", "data", "media_type", "detail"))
    if (url is None) == (data is None):
        raise _refuse(index, "needs exactly one of 'url' and 'data'")
    if media_type is not None and media_type not in IMAGE_MEDIA_TYPES:
        raise _refuse(index, f"media_type {media_type!r} is not one of {sorted(IMAGE_MEDIA_TYPES)}")
    if detail is not None and detail not in IMAGE_DETAILS:
        raise _refuse(index, f"detail {detail!r} is not one of {sorted(IMAGE_DETAILS)}")
    if url is not None:
        if not isinstance(url, str) or not url or len(url) > MAX_IMAGE_URL_CHARS:
            raise _refuse(index, f"url must be a string of 1-{MAX_IMAGE_URL_CHARS} characters")
        parts = urlsplit(url)
        if parts.scheme.lower() not in IMAGE_URL_SCHEMES or not parts.netloc:
            raise _refuse(
                index, "url must be an http(s) URL with a host; send inline bytes as 'data' with a 'media_type'"
            )
        return
    if media_type is None:
        raise _refuse(index, "inline 'data' needs a 'media_type'")
    if not isinstance(data, str) or not data:
        raise _refuse(index, "data must be a non-empty base64 string")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _refuse(index, "data is not valid standard base64 (A-Z a-z 0-9 + /, '=' padding)") from None


def check_images(event_type: str, event_data: Mapping[str, Any]) -> None:
    """Raise ``InvalidArgument`` unless ``event_data["images"]`` (when present) is a valid image list.

    Only ``ag2.msg.text`` and ``ag2.packet`` carry images; on other event types the key is the
    sender's own business and passes unchecked, like any custom payload."""
    if event_type not in _IMAGE_EVENT_TYPES or IMAGES_KEY not in event_data:
        return
    images = event_data[IMAGES_KEY]
    if not isinstance(images, list):
        raise InvalidArgument(
            f"event_data.images must be a list of images, not a JSON {type(images).__name__}.",
            metadata={"field": "event_data.images"},
        )
    if len(images) > MAX_IMAGES_PER_ENVELOPE:
        raise InvalidArgument(
            f"event_data.images has {len(images)} images; an envelope carries at most {MAX_IMAGES_PER_ENVELOPE}. "
            "Send the rest in further envelopes.",
            metadata={"field": "event_data.images", "limit": str(MAX_IMAGES_PER_ENVELOPE)},
        )
    for index, item in enumerate(images):
        _check_one(index, item)


def envelope_images(envelope: Envelope) -> list[dict[str, Any]]:
    """The images of an ``ag2.msg.text`` / ``ag2.packet`` envelope (``[]`` for none or other types).

    Envelopes the hub admitted passed :func:`check_images`; items that are not objects are skipped
    (an envelope built locally and never checked)."""
    if envelope.event_type not in _IMAGE_EVENT_TYPES:
        return []
    images = envelope.event_data.get(IMAGES_KEY)
    if not isinstance(images, list):
        return []
    return [dict(item) for item in images if isinstance(item, Mapping)]


def image_url(item: Mapping[str, Any]) -> str:
    """The URL a model is sent for an image: its ``url``, or a ``data:<media_type>;base64,…`` URL."""
    url = item.get("url")
    if isinstance(url, str) and url:
        return url
    return f"data:{item.get('media_type', '')};base64,{item.get('data', '')}"
