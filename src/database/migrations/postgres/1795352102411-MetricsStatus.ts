import { MigrationInterface, QueryRunner } from 'typeorm';

export class MetricsStatus1795352102411 implements MigrationInterface {
  name = 'MetricsStatus1795352102411';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "clusters" ADD "metrics_status" character varying(16) NOT NULL DEFAULT 'unreachable'`,
    );
    await queryRunner.query(`ALTER TABLE "clusters" ADD "metrics_error" character varying(1024)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "metrics_error"`);
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "metrics_status"`);
  }
}
