/** A JSON value as produced by `JSON.parse`. */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;

/** A JSON object (what every `*_json` field of the contract holds). */
export interface JsonObject {
  [key: string]: JsonValue;
}

/** True for plain JSON objects (not arrays, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Parse a contract `*_json` field that holds a JSON object. The empty string is
 * `{}` (as the contract says); text that is not a JSON object yields `{}` too, so
 * a malformed payload never throws inside the delivery path — the raw text stays
 * available on the envelope.
 */
export function parseJsonObject(text: string): JsonObject {
  if (!text) return {};
  try {
    const value: unknown = JSON.parse(text);
    return isJsonObject(value) ? value : {};
  } catch {
    return {};
  }
}

/** Parse JSON text into a {@link JsonValue} (`null` for the empty string). */
export function parseJsonValue(text: string): JsonValue {
  if (!text) return null;
  return JSON.parse(text) as JsonValue;
}
