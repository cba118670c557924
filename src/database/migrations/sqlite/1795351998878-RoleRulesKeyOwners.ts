import type { MigrationInterface, QueryRunner } from 'typeorm';
import { BUILT_IN_RULES, FIRST_ADMIN } from '../common/1795351998878-RoleRulesKeyOwners.data.js';

const API_KEYS_WITH_OWNER = `("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "owner_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"), CONSTRAINT "fk_api_keys_owner" FOREIGN KEY ("owner_id") REFERENCES "users" ("id") ON DELETE CASCADE ON UPDATE NO ACTION)`;
const API_KEYS_WITH_ROLE = `("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "role_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"), CONSTRAINT "fk_api_keys_role" FOREIGN KEY ("role_id") REFERENCES "roles" ("id") ON DELETE RESTRICT ON UPDATE NO ACTION)`;
const COMMON_COLUMNS = `"id", "name", "name_key", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at"`;

/** Roles carry rules; API keys get any set of roles and an owner (existing keys: the first admin). */
export class RoleRulesKeyOwners1795351998878 implements MigrationInterface {
  name = 'RoleRulesKeyOwners1795351998878';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "roles" ADD "builtin" boolean NOT NULL DEFAULT (0)`);
    await queryRunner.query(`ALTER TABLE "roles" ADD "rules" text NOT NULL DEFAULT ('[]')`);
    for (const [name, rules] of Object.entries(BUILT_IN_RULES)) {
      await queryRunner.query(`UPDATE "roles" SET "builtin" = 1, "rules" = ? WHERE "name" = ?`, [
        JSON.stringify(rules),
        name,
      ]);
    }
    // Nothing references api_keys yet, so it can be rebuilt without cascading anywhere.
    await queryRunner.query(
      `CREATE TABLE "temporary_key_roles" ("api_key_id" integer NOT NULL, "role_id" integer NOT NULL)`,
    );
    await queryRunner.query(`INSERT INTO "temporary_key_roles" SELECT "id", "role_id" FROM "api_keys"`);
    await queryRunner.query(`CREATE TABLE "temporary_api_keys" ${API_KEYS_WITH_OWNER}`);
    await queryRunner.query(
      `INSERT INTO "temporary_api_keys" (${COMMON_COLUMNS}, "owner_id") SELECT ${COMMON_COLUMNS}, ${FIRST_ADMIN} FROM "api_keys" WHERE ${FIRST_ADMIN} IS NOT NULL`,
    );
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`ALTER TABLE "temporary_api_keys" RENAME TO "api_keys"`);
    await queryRunner.query(`CREATE INDEX "idx_api_keys_owner" ON "api_keys" ("owner_id")`);
    await queryRunner.query(
      `CREATE TABLE "api_key_roles" ("api_key_id" integer NOT NULL, "role_id" integer NOT NULL, CONSTRAINT "fk_api_key_roles_key" FOREIGN KEY ("api_key_id") REFERENCES "api_keys" ("id") ON DELETE CASCADE ON UPDATE NO ACTION, CONSTRAINT "fk_api_key_roles_role" FOREIGN KEY ("role_id") REFERENCES "roles" ("id") ON DELETE RESTRICT ON UPDATE NO ACTION, PRIMARY KEY ("api_key_id", "role_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_api_key_roles_role" ON "api_key_roles" ("role_id")`);
    await queryRunner.query(
      `INSERT INTO "api_key_roles" SELECT "api_key_id", "role_id" FROM "temporary_key_roles" WHERE "api_key_id" IN (SELECT "id" FROM "api_keys")`,
    );
    await queryRunner.query(`DROP TABLE "temporary_key_roles"`);
    await queryRunner.query(`ALTER TABLE "clusters" ADD "impersonate" boolean NOT NULL DEFAULT (0)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "impersonate"`);
    await queryRunner.query(
      `CREATE TABLE "temporary_key_roles" ("api_key_id" integer NOT NULL, "role_id" integer NOT NULL)`,
    );
    await queryRunner.query(
      `INSERT INTO "temporary_key_roles" SELECT "api_key_id", MIN("role_id") FROM "api_key_roles" GROUP BY "api_key_id"`,
    );
    await queryRunner.query(`DROP TABLE "api_key_roles"`);
    await queryRunner.query(`CREATE TABLE "temporary_api_keys" ${API_KEYS_WITH_ROLE}`);
    await queryRunner.query(
      `INSERT INTO "temporary_api_keys" (${COMMON_COLUMNS}, "role_id") SELECT ${COMMON_COLUMNS.replace(/"(\w+)"/g, 'k."$1"')}, t."role_id" FROM "api_keys" k INNER JOIN "temporary_key_roles" t ON t."api_key_id" = k."id"`,
    );
    await queryRunner.query(`DROP TABLE "temporary_key_roles"`);
    await queryRunner.query(`DROP INDEX "idx_api_keys_owner"`);
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`ALTER TABLE "temporary_api_keys" RENAME TO "api_keys"`);
    await queryRunner.query(
      `DELETE FROM "user_roles" WHERE "role_id" IN (SELECT "id" FROM "roles" WHERE NOT "builtin")`,
    );
    await queryRunner.query(`DELETE FROM "roles" WHERE NOT "builtin"`);
    await queryRunner.query(`ALTER TABLE "roles" DROP COLUMN "rules"`);
    await queryRunner.query(`ALTER TABLE "roles" DROP COLUMN "builtin"`);
  }
}
