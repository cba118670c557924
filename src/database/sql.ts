import type { DataSource } from 'typeorm';

/**
 * Runs hand-written SQL with `:name` parameters on either dialect. Dates are bound the way TypeORM
 * stores them (SQLite: UTC text `YYYY-MM-DD HH:MM:SS.SSS`; PostgreSQL: the Date itself).
 */
export async function runSql<T = unknown>(
  dataSource: DataSource,
  sql: string,
  params: Record<string, unknown>,
): Promise<T[]> {
  const sqlite = dataSource.options.type === 'better-sqlite3';
  const bound = Object.fromEntries(
    Object.entries(params).map(([k, v]) => [
      k,
      sqlite && v instanceof Date ? v.toISOString().replace('T', ' ').replace('Z', '') : v,
    ]),
  );
  const [query, values] = dataSource.driver.escapeQueryWithParameters(sql, bound);
  return dataSource.query(query, values);
}

/** A timestamp read by hand-written SQL: PostgreSQL gives a Date, SQLite the UTC text TypeORM stored. */
export function dbDate(value: Date | string): Date {
  return value instanceof Date ? value : new Date(`${value.replace(' ', 'T')}Z`);
}
