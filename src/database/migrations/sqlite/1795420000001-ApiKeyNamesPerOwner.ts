import { MigrationInterface, QueryRunner } from 'typeorm';

const COLUMNS = `"id", "name", "name_key", "owner_id", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at"`;
const API_KEYS = (nameKeyUnique: string) =>
  `("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "owner_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, ${nameKeyUnique}CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"), CONSTRAINT "fk_api_keys_owner" FOREIGN KEY ("owner_id") REFERENCES "users" ("id") ON DELETE CASCADE ON UPDATE NO ACTION)`;

/**
 * API key names are unique per owner, not across users (a 409 named other users' keys). SQLite
 * cannot drop a table constraint, so the table is rebuilt; migrations run with foreign keys off, so
 * dropping the old table does not cascade to `api_key_roles`.
 */
export class ApiKeyNamesPerOwner1795420000001 implements MigrationInterface {
  name = 'ApiKeyNamesPerOwner1795420000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await this.rebuild(queryRunner, '');
    await queryRunner.query(`CREATE UNIQUE INDEX "idx_api_keys_owner_name" ON "api_keys" ("owner_id", "name_key")`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "idx_api_keys_owner_name"`);
    await this.rebuild(queryRunner, `CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), `);
  }

  private async rebuild(queryRunner: QueryRunner, nameKeyUnique: string): Promise<void> {
    await queryRunner.query(`CREATE TABLE "temporary_api_keys" ${API_KEYS(nameKeyUnique)}`);
    await queryRunner.query(`INSERT INTO "temporary_api_keys" (${COLUMNS}) SELECT ${COLUMNS} FROM "api_keys"`);
    await queryRunner.query(`DROP INDEX "idx_api_keys_owner"`);
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`ALTER TABLE "temporary_api_keys" RENAME TO "api_keys"`);
    await queryRunner.query(`CREATE INDEX "idx_api_keys_owner" ON "api_keys" ("owner_id")`);
  }
}
