/**
 * A connection string as messages may show it: every password in it written `***`, that of the
 * user part (`postgres://user:***@host/db`) and those of the query (`?password=***`,
 * `?sslpassword=***`, any parameter whose name holds pass, secret or token), which libpq reads as
 * well. Text, not a parsed URL: a string `new URL` refuses is masked all the same. The user part
 * ends at the last `@` before the host, so a password holding an unencoded `@` is masked whole.
 */
export function maskedAddress(connectionString: string): string {
  return connectionString
    .replace(/([?&][^=&#]*(?:pass|secret|token)[^=&#]*=)[^&#]*/gi, '$1***')
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#]*):[^?#]*@(?=[^@/?#]*(?:[/?#]|$))/i, '$1:***@');
}
