/** What an answer means, without a server: errors, Retry-After, query strings. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Busy, Client, DEFAULT_URL, MAX_PAUSE_S, MIN_PAUSE_S, WatchkeeperError, retryAfter } from "../src/index.js";
import { answerOf, withQuery } from "../src/wire.js";

describe("answers", () => {
  it("a success is its JSON, or null without a body", () => {
    assert.deepEqual(answerOf(200, '{"a":1}', "OK", null), { a: 1 });
    assert.equal(answerOf(204, "", "No Content", null), null);
  });

  it("an error answer throws with the server's code, message and field", () => {
    const body = JSON.stringify({ error: { code: "invalid", message: "title is required", field: "title" } });
    assert.throws(
      () => answerOf(422, body, "Unprocessable Entity", null),
      (error: unknown) =>
        error instanceof WatchkeeperError &&
        !(error instanceof Busy) &&
        error.status === 422 &&
        error.code === "invalid" &&
        error.message === "title is required" &&
        error.field === "title" &&
        String(error) === "WatchkeeperError: title is required (HTTP 422, invalid)",
    );
  });

  it("an answer that is not the server's JSON keeps its text, or the reason", () => {
    assert.throws(() => answerOf(502, "<html>bad gateway</html>", "Bad Gateway", null), {
      status: 502,
      code: "http_error",
      message: "<html>bad gateway</html>",
    });
    assert.throws(() => answerOf(503, "", "Service Unavailable", null), {
      code: "http_error",
      message: "Service Unavailable",
    });
  });

  it("a 429 is Busy with its Retry-After in seconds", () => {
    const body = JSON.stringify({ error: { code: "too_many_requests", message: "retry in 5 s" } });
    assert.throws(
      () => answerOf(429, body, "Too Many Requests", "5"),
      (error: unknown) =>
        error instanceof Busy && error instanceof WatchkeeperError && error.status === 429 && error.retryAfterS === 5,
    );
  });
});

describe("Retry-After", () => {
  it("reads seconds and HTTP dates, within bounds", () => {
    assert.equal(retryAfter("2.5"), 2.5);
    assert.equal(retryAfter("0"), MIN_PAUSE_S);
    assert.equal(retryAfter("3600"), MAX_PAUSE_S);
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(
      retryAfter("Thu, 01 Jan 2026 00:00:07 GMT", () => now),
      7,
    );
  });

  it("falls back to one second when missing or unreadable", () => {
    assert.equal(retryAfter(null), 1);
    assert.equal(retryAfter(" "), 1);
    assert.equal(retryAfter("soon"), 1);
  });
});

describe("client defaults", () => {
  it("takes the URL from WATCHKEEPER_URL, else the default, without a trailing slash", () => {
    const saved = process.env.WATCHKEEPER_URL;
    try {
      process.env.WATCHKEEPER_URL = "http://example.invalid:9/";
      assert.equal(new Client().url, "http://example.invalid:9");
      delete process.env.WATCHKEEPER_URL;
      assert.equal(new Client().url, DEFAULT_URL);
      assert.equal(new Client("http://a:1//").url, "http://a:1");
      assert.equal(new Client().timeoutS, 10);
    } finally {
      if (saved === undefined) {
        delete process.env.WATCHKEEPER_URL;
      } else {
        process.env.WATCHKEEPER_URL = saved;
      }
    }
  });

  it("writes booleans as the server reads them and leaves out what is not given", () => {
    assert.equal(withQuery("/p", { all: true, a: undefined, b: null, n: 3 }), "/p?all=true&n=3");
    assert.equal(withQuery("/p", { a: undefined }), "/p");
  });
});
