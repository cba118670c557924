import { MigrationInterface, QueryRunner } from 'typeorm';

/** API key names are unique per owner, not across users (a 409 named other users' keys). */
export class ApiKeyNamesPerOwner1795420000001 implements MigrationInterface {
  name = 'ApiKeyNamesPerOwner1795420000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "UQ_ac92970f48723920521aedd0b8c"`);
    await queryRunner.query(`CREATE UNIQUE INDEX "idx_api_keys_owner_name" ON "api_keys" ("owner_id", "name_key")`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."idx_api_keys_owner_name"`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key")`,
    );
  }
}
