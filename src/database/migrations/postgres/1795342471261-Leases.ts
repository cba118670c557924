import { MigrationInterface, QueryRunner } from 'typeorm';

export class Leases1795342471261 implements MigrationInterface {
  name = 'Leases1795342471261';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "leases" ("name" character varying(64) NOT NULL, "holder" character varying(64), "expires_at" TIMESTAMP NOT NULL, CONSTRAINT "PK_8f564523b661f9e2648c3377687" PRIMARY KEY ("name"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "leases"`);
  }
}
