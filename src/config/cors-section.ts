import { z } from 'zod';

/** `server.cors`: browser cross-origin access to the client API. Off (no origins) by default. */

/** RFC 9110 token characters: a method or header name. */
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

export const corsSectionSchema = z
  .strictObject({
    allowedOrigins: z
      .array(z.string().min(1))
      .default([])
      .describe(
        'origins (`https://app.example.com`) whose browser pages may call the API, or `*` for any; empty = CORS off ' +
          '(no `Access-Control-*` headers; `OPTIONS` is then a method no route takes: 405 on a routed path)',
      ),
    allowedMethods: z
      .array(z.string().regex(TOKEN))
      .default(['GET', 'POST', 'OPTIONS'])
      .describe('`Access-Control-Allow-Methods` of a preflight answer'),
    allowedHeaders: z
      .array(z.string().regex(TOKEN))
      .default(['authorization', 'content-type'])
      .describe(
        '`Access-Control-Allow-Headers` of a preflight answer (the OpenAI SDKs send more: add theirs)',
      ),
    maxAgeSeconds: z
      .int()
      .min(0)
      .default(600)
      .describe('`Access-Control-Max-Age`: how long a browser may cache a preflight answer'),
  })
  .prefault({})
  .describe('CORS for browser clients (off unless `allowedOrigins` is set)');

export type CorsSection = z.infer<typeof corsSectionSchema>;
