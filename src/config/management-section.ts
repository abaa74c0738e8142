import { z } from 'zod';

/** The coordinator's `management` section: the management API's listener, token and URL policy. */
export const managementSectionSchema = z
  .strictObject({
    port: z
      .int()
      .min(0)
      .max(65535)
      .nullable()
      .default(null)
      .describe('management API port (its own, never the gateway port); null = off, 0 = any free port'),
    host: z.string().min(1).default('127.0.0.1').describe('management API listen address'),
    adminToken: z
      .string()
      .min(1)
      .optional()
      .describe(
        'required `Authorization: Bearer` token; unset = no auth (prefer env `MOTOR_ADMIN_TOKEN`: the ' +
          'config file does not expand variables)',
      ),
    allowInstanceUrls: z
      .strictObject({
        linkLocal: z
          .boolean()
          .default(false)
          .describe(
            'accept instance URLs on link-local addresses (169.254.0.0/16, fe80::/10) or cloud-metadata ' +
              'hosts (`metadata.google.internal`, `100.100.100.200`, …); refused with 400 otherwise',
          ),
        self: z
          .boolean()
          .default(false)
          .describe(
            "accept instance URLs naming this coordinator's own gateway or management port on a local " +
              'address (a request sent there comes back to the coordinator, which refuses it with 508)',
          ),
      })
      .prefault({})
      .describe(
        'URLs the management API accepts for registered instances (config-file instances are not checked)',
      ),
  })
  .prefault({})
  .describe('the management API: register, drain, pause instances (docs/control-plane.md)');
