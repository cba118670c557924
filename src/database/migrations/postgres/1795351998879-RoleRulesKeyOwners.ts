import type { MigrationInterface, QueryRunner } from 'typeorm';
import { BUILT_IN_RULES, FIRST_ADMIN } from '../common/1795351998878-RoleRulesKeyOwners.data.js';

/** Roles carry rules; API keys get any set of roles and an owner (existing keys: the first admin). */
export class RoleRulesKeyOwners1795351998879 implements MigrationInterface {
  name = 'RoleRulesKeyOwners1795351998879';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "roles" ADD "builtin" boolean NOT NULL DEFAULT false`);
    await queryRunner.query(`ALTER TABLE "roles" ADD "rules" text NOT NULL DEFAULT '[]'`);
    for (const [name, rules] of Object.entries(BUILT_IN_RULES)) {
      await queryRunner.query(`UPDATE "roles" SET "builtin" = true, "rules" = $1 WHERE "name" = $2`, [
        JSON.stringify(rules),
        name,
      ]);
    }
    await queryRunner.query(
      `CREATE TABLE "api_key_roles" ("api_key_id" integer NOT NULL, "role_id" integer NOT NULL, CONSTRAINT "PK_api_key_roles" PRIMARY KEY ("api_key_id", "role_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_api_key_roles_role" ON "api_key_roles" ("role_id")`);
    await queryRunner.query(
      `INSERT INTO "api_key_roles" ("api_key_id", "role_id") SELECT "id", "role_id" FROM "api_keys"`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "owner_id" integer`);
    await queryRunner.query(`UPDATE "api_keys" SET "owner_id" = ${FIRST_ADMIN}`);
    await queryRunner.query(
      `DELETE FROM "api_key_roles" WHERE "api_key_id" IN (SELECT "id" FROM "api_keys" WHERE "owner_id" IS NULL)`,
    );
    await queryRunner.query(`DELETE FROM "api_keys" WHERE "owner_id" IS NULL`);
    await queryRunner.query(`ALTER TABLE "api_keys" ALTER COLUMN "owner_id" SET NOT NULL`);
    await queryRunner.query(`CREATE INDEX "idx_api_keys_owner" ON "api_keys" ("owner_id")`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "fk_api_keys_owner" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "fk_api_keys_role"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "role_id"`);
    await queryRunner.query(
      `ALTER TABLE "api_key_roles" ADD CONSTRAINT "fk_api_key_roles_key" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "api_key_roles" ADD CONSTRAINT "fk_api_key_roles_role" FOREIGN KEY ("role_id") REFERENCES "roles"("id") ON DELETE RESTRICT ON UPDATE NO ACTION`,
    );
    await queryRunner.query(`ALTER TABLE "clusters" ADD "impersonate" boolean NOT NULL DEFAULT false`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "impersonate"`);
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "role_id" integer`);
    await queryRunner.query(
      `UPDATE "api_keys" k SET "role_id" = (SELECT MIN(kr."role_id") FROM "api_key_roles" kr WHERE kr."api_key_id" = k."id")`,
    );
    await queryRunner.query(`DELETE FROM "api_keys" WHERE "role_id" IS NULL`);
    await queryRunner.query(`ALTER TABLE "api_keys" ALTER COLUMN "role_id" SET NOT NULL`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "fk_api_keys_role" FOREIGN KEY ("role_id") REFERENCES "roles"("id") ON DELETE RESTRICT ON UPDATE NO ACTION`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "fk_api_keys_owner"`);
    await queryRunner.query(`DROP INDEX "public"."idx_api_keys_owner"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "owner_id"`);
    await queryRunner.query(`DROP TABLE "api_key_roles"`);
    await queryRunner.query(
      `DELETE FROM "user_roles" WHERE "role_id" IN (SELECT "id" FROM "roles" WHERE NOT "builtin")`,
    );
    await queryRunner.query(`DELETE FROM "roles" WHERE NOT "builtin"`);
    await queryRunner.query(`ALTER TABLE "roles" DROP COLUMN "rules"`);
    await queryRunner.query(`ALTER TABLE "roles" DROP COLUMN "builtin"`);
  }
}
