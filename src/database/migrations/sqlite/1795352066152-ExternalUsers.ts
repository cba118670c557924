import { MigrationInterface, QueryRunner } from 'typeorm';

/** Users of a single sign-on provider are found by the provider's subject; the super user may sign in when password login is off. */
export class ExternalUsers1795352066152 implements MigrationInterface {
  name = 'ExternalUsers1795352066152';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "users" ADD COLUMN "subject" varchar(255)`);
    await queryRunner.query(`ALTER TABLE "users" ADD COLUMN "super_user" boolean NOT NULL DEFAULT (0)`);
    await queryRunner.query(`CREATE UNIQUE INDEX "uq_users_provider_subject" ON "users" ("provider", "subject") `);
    // The super user is the first user ever created (create_super_user works only while no user exists).
    await queryRunner.query(
      `UPDATE "users" SET "super_user" = 1 WHERE "provider" = 'password' AND "id" = (SELECT MIN("id") FROM "users")`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "uq_users_provider_subject"`);
    await queryRunner.query(`ALTER TABLE "users" DROP COLUMN "super_user"`);
    await queryRunner.query(`ALTER TABLE "users" DROP COLUMN "subject"`);
  }
}
