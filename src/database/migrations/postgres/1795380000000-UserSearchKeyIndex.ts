import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The user search matches usernames on `username_key` (the username lower-cased once, when stored)
 * rather than on `lower(username)` of every row: the trigram index moves to that column. Only where
 * the trigram indexes exist (pg_trgm could be created).
 */
export class UserSearchKeyIndex1795380000000 implements MigrationInterface {
  name = 'UserSearchKeyIndex1795380000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    const [{ ok }] = await queryRunner.query(`SELECT to_regclass('idx_users_username_trgm') IS NOT NULL AS ok`);
    if (!ok) return;
    await queryRunner.query(
      `CREATE INDEX "idx_users_username_key_trgm" ON "users" USING gin ("username_key" gin_trgm_ops)`,
    );
    await queryRunner.query(`DROP INDEX "idx_users_username_trgm"`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    const [{ ok }] = await queryRunner.query(`SELECT to_regclass('idx_users_username_key_trgm') IS NOT NULL AS ok`);
    if (!ok) return;
    await queryRunner.query(
      `CREATE INDEX "idx_users_username_trgm" ON "users" USING gin (lower("username") gin_trgm_ops)`,
    );
    await queryRunner.query(`DROP INDEX "idx_users_username_key_trgm"`);
  }
}
