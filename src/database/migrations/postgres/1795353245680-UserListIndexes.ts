import { Logger } from '@nestjs/common';
import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The user list stays fast with many users: trigram indexes (pg_trgm) serve the substring search when
 * the extension can be created (a trusted extension: the database owner may), and indexes in the "C"
 * collation serve each sort order.
 */
export class UserListIndexes1795353245680 implements MigrationInterface {
  name = 'UserListIndexes1795353245680';

  public async up(queryRunner: QueryRunner): Promise<void> {
    const [{ ok }] = await queryRunner.query(
      `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
           OR (EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')
               AND has_database_privilege(current_database(), 'CREATE')) AS ok`,
    );
    if (ok) {
      await queryRunner.query(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);
      await queryRunner.query(
        `CREATE INDEX "idx_users_username_trgm" ON "users" USING gin (lower("username") gin_trgm_ops)`,
      );
      await queryRunner.query(`CREATE INDEX "idx_users_name_trgm" ON "users" USING gin (lower("name") gin_trgm_ops)`);
    } else {
      new Logger('Migrations').warn('pg_trgm cannot be created here: searching the user list scans the table');
    }
    await queryRunner.query(`CREATE INDEX "idx_users_username_sort" ON "users" ("username_key" COLLATE "C", "id")`);
    await queryRunner.query(`CREATE INDEX "idx_users_name_sort" ON "users" (lower("name") COLLATE "C", "id")`);
    await queryRunner.query(`CREATE INDEX "idx_users_created_sort" ON "users" ("created_at", "id")`);
    await queryRunner.query(`CREATE INDEX "idx_users_last_login_sort" ON "users" ("last_login_at", "id")`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const index of [
      'idx_users_last_login_sort',
      'idx_users_created_sort',
      'idx_users_name_sort',
      'idx_users_username_sort',
      'idx_users_name_trgm',
      'idx_users_username_trgm',
    ])
      await queryRunner.query(`DROP INDEX IF EXISTS "${index}"`);
  }
}
