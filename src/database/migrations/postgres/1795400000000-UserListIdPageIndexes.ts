import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every sort of the unfiltered user list pages its ids by an index-only scan (users.service.ts): an
 * offset is skipped in the index alone, without reading the rows it skips.
 * - By name: the index also holds `name` (INCLUDE). PostgreSQL answers from an index only when every
 *   column the query names is in it, and `lower(name)` names `name`.
 * - By last login, newest first with never-logged-in users last: `last_login_at DESC NULLS LAST`. The
 *   ascending order (nulls last) is the other index read forward; read backward it puts nulls first.
 */
export class UserListIdPageIndexes1795400000000 implements MigrationInterface {
  name = 'UserListIdPageIndexes1795400000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "idx_users_name_sort"`);
    await queryRunner.query(
      `CREATE INDEX "idx_users_name_sort" ON "users" (lower("name") COLLATE "C", "id") INCLUDE ("name")`,
    );
    await queryRunner.query(
      `CREATE INDEX "idx_users_last_login_desc_sort" ON "users" ("last_login_at" DESC NULLS LAST, "id" DESC)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "idx_users_last_login_desc_sort"`);
    await queryRunner.query(`DROP INDEX "idx_users_name_sort"`);
    await queryRunner.query(`CREATE INDEX "idx_users_name_sort" ON "users" (lower("name") COLLATE "C", "id")`);
  }
}
