import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dataSourceOptions } from './data-source.js';
import { Transactions } from './transactions.js';

@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({ ...dataSourceOptions(config), migrationsRun: true }),
    }),
  ],
  providers: [Transactions],
  exports: [Transactions],
})
export class DatabaseModule {}
